#include "common/transfer/fetcher.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/protocol/publish.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/util/checksum.hpp"
#include "common/util/status.hpp"

namespace warp::transfer {
namespace fs = std::filesystem;

namespace {

// "tcp://HOST:PORT" split at its last colon (HOST may be "[::]"); false for anything else.
bool split_tcp_endpoint(const std::string& endpoint, std::string& host, std::string& port) {
  constexpr std::string_view kScheme = "tcp://";
  if (endpoint.rfind(kScheme, 0) != 0) return false;
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon < kScheme.size()) return false;
  host = endpoint.substr(kScheme.size(), colon - kScheme.size());
  port = endpoint.substr(colon + 1);
  return !host.empty() && !port.empty();
}

bool wildcard_host(const std::string& host) {
  return host == "0.0.0.0" || host == "*" || host == "[::]" || host == "::" || host == "[::0]";
}

}  // namespace

std::string reachable_fetch_endpoint(const std::string& announced, const std::string& publish_endpoint) {
  std::string host, port, publish_host, publish_port;
  if (!split_tcp_endpoint(announced, host, port) || !wildcard_host(host)) return announced;
  if (!split_tcp_endpoint(publish_endpoint, publish_host, publish_port) || wildcard_host(publish_host))
    return announced;
  return "tcp://" + publish_host + ":" + port;
}

struct GenerationSubscriber::State {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::sub};
  std::string endpoint;
};

GenerationSubscriber::GenerationSubscriber(const std::string& endpoint, const CurveConfig& curve)
    : state_(std::make_unique<State>()) {
  state_->endpoint = endpoint;
  if (curve.enabled()) make_curve_client(state_->socket, curve, curve_server_key(curve, "indexer"));
  state_->socket.set(zmq::sockopt::subscribe, "generation");
  state_->socket.connect(endpoint);
}

GenerationSubscriber::~GenerationSubscriber() = default;

std::optional<Announcement> GenerationSubscriber::next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{state_->socket.handle(), 0, ZMQ_POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (zmq::poll(&item, 1, std::max(left, std::chrono::milliseconds(1))) == 0) continue;
    zmq::message_t topic, body;
    if (!state_->socket.recv(topic) || !topic.more() || !state_->socket.recv(body)) continue;
    try {
      FrameReader frame(body);
      auto message = frame.root<protocol::GenerationAnnouncement>();
      Announcement a;
      a.generation = message.getGeneration();
      a.partitions = message.getPartitions();
      a.fetch_endpoint = reachable_fetch_endpoint(message.getFetchEndpoint(), state_->endpoint);
      for (auto file : message.getFiles())
        a.files.push_back({std::string(file.getPath()), file.getSize(), file.getCrc32()});
      return a;
    } catch (const std::exception&) {
      continue;  // not ours or corrupt: wait for the next one
    }
  }
  return std::nullopt;
}

namespace {

// One chunk, retried until its checksum holds; false after max_attempts.
bool fetch_chunk(zmq::socket_t& socket, uint64_t generation, const GenerationFile& file, uint64_t offset,
                 uint32_t length, const FetchOptions& options, std::string& data, FetchStats& stats) {
  for (int attempt = 0; attempt < options.max_attempts; ++attempt) {
    if (attempt > 0) ++stats.retries;
    capnp::MallocMessageBuilder builder;
    auto request = builder.initRoot<protocol::FetchRequest>();
    request.setGeneration(generation);
    request.setPath(file.path);
    request.setOffset(offset);
    request.setLength(length);
    // Never block: with no connection to send on (the indexer down, or its CURVE handshake refused
    // this leaf's key) the attempt counts as lost, like a lost reply.
    const auto deadline = std::chrono::steady_clock::now() + options.reply_timeout;
    zmq::pollitem_t writable{socket.handle(), 0, ZMQ_POLLOUT, 0};
    if (zmq::poll(&writable, 1, options.reply_timeout) == 0 ||
        !socket.send(to_frame(builder), zmq::send_flags::dontwait)) {
      continue;
    }
    while (std::chrono::steady_clock::now() < deadline) {  // skip stale replies to earlier attempts
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, options.reply_timeout) == 0) break;
      zmq::message_t reply;
      if (!socket.recv(reply)) break;
      try {
        FrameReader frame(reply);
        auto response = frame.root<protocol::FetchResponse>();
        if (response.getPath() != kj::StringPtr(file.path.c_str()) || response.getOffset() != offset) continue;
        if (response.getError().size() > 0) throw Error(std::string("server: ") + response.getError().cStr());
        const auto bytes = response.getData();
        if (bytes.size() != length || crc32_of(bytes.begin(), bytes.size()) != response.getCrc32()) break;  // corrupt
        data.assign(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
        return true;
      } catch (const Error&) {
        throw;
      } catch (const std::exception&) {
        break;  // malformed reply: ask again
      }
    }
  }
  return false;
}

// Top-level files (manifest, inputs) always; partition directories (part-NNNN, as write_index names
// them) only when wanted.
bool wanted_file(const std::string& path, const std::vector<uint32_t>& partitions) {
  if (partitions.empty() || path.rfind("part-", 0) != 0) return true;
  const size_t slash = path.find('/');
  try {
    const uint32_t id = static_cast<uint32_t>(std::stoul(path.substr(5, slash - 5)));
    return std::find(partitions.begin(), partitions.end(), id) != partitions.end();
  } catch (...) {
    return true;
  }
}

}  // namespace

std::string fetch_generation(const Announcement& announcement, const std::string& root, const FetchOptions& options,
                             FetchStats& stats) {
  const fs::path final_dir = fs::path(root) / generation_dir_name(announcement.generation);
  if (fs::exists(final_dir)) return final_dir.string();
  const std::string name = generation_dir_name(announcement.generation);
  const fs::path partial = fs::path(root) / (name + ".partial-" + std::to_string(::getpid()));
  fs::create_directories(root);
  for (const auto& entry : fs::directory_iterator(root)) {  // left by a fetcher that was killed
    if (entry.path().filename().string().rfind(name + ".partial-", 0) == 0) fs::remove_all(entry.path());
  }
  fs::create_directories(partial);
  try {
    zmq::context_t context(1);
    zmq::socket_t socket(context, zmq::socket_type::dealer);
    socket.set(zmq::sockopt::linger, 0);
    if (options.curve.enabled()) make_curve_client(socket, options.curve, curve_server_key(options.curve, "indexer"));
    socket.connect(announcement.fetch_endpoint);
    for (const GenerationFile& file : announcement.files) {
      if (file.path.find("..") != std::string::npos || fs::path(file.path).is_absolute()) {
        throw Error("announcement names an unsafe path '" + file.path + "'");
      }
      if (!wanted_file(file.path, options.partitions)) continue;
      const fs::path target = partial / file.path;
      fs::create_directories(target.parent_path());
      bool complete = false;
      for (int attempt = 0; attempt < options.max_attempts && !complete; ++attempt) {
        std::ofstream out(target, std::ios::binary | std::ios::trunc);
        std::string data;
        for (uint64_t offset = 0; offset < file.size; offset += options.chunk_bytes) {
          const uint32_t length = static_cast<uint32_t>(std::min<uint64_t>(options.chunk_bytes, file.size - offset));
          if (!fetch_chunk(socket, announcement.generation, file, offset, length, options, data, stats)) {
            throw Error("fetching " + file.path + " of generation " + std::to_string(announcement.generation) +
                        " from " + announcement.fetch_endpoint + ": no valid reply for the chunk at " +
                        std::to_string(offset) + " after " + std::to_string(options.max_attempts) + " attempts");
          }
          out.write(data.data(), static_cast<std::streamsize>(data.size()));
          stats.bytes += data.size();
          ++stats.chunks;
        }
        out.close();
        if (!out) throw Error("cannot write " + target.string());
        complete = crc32_of_file(target.string()) == file.crc32;
        if (!complete) ++stats.retries;
      }
      if (!complete)
        throw Error("fetching " + file.path + ": file checksum mismatch after " + std::to_string(options.max_attempts) +
                    " attempts");
    }
    fs::rename(partial, final_dir);  // the generation appears whole or not at all
  } catch (...) {
    fs::remove_all(partial);
    throw;
  }
  return final_dir.string();
}

}  // namespace warp::transfer
