#include "common/transfer/fetcher.hpp"

#include <sys/statvfs.h>
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
  state_->socket.set(zmq::sockopt::maxmsgsize, int64_t{80} << 20);  // a manifest is at most 64 MiB
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
      const auto manifest = message.getManifest();
      const auto signature = message.getSignature();
      a.manifest.assign(reinterpret_cast<const char*>(manifest.begin()), manifest.size());
      a.signature.assign(reinterpret_cast<const char*>(signature.begin()), signature.size());
      a.publish_endpoint = state_->endpoint;
      return a;
    } catch (const std::exception&) {
      continue;  // not ours or corrupt: wait for the next one
    }
  }
  return std::nullopt;
}

GenerationManifest open_announcement(const Announcement& announcement, const ManifestLimits& limits) {
  GenerationManifest manifest = open_manifest(announcement.manifest, announcement.signature, limits);
  if (manifest.generation != announcement.generation) {
    throw GenerationRefused(RefusalReason::kMalformed,
                            "announced as generation " + std::to_string(announcement.generation) +
                                " with the manifest of generation " + std::to_string(manifest.generation));
  }
  manifest.fetch_endpoint = reachable_fetch_endpoint(manifest.fetch_endpoint, announcement.publish_endpoint);
  return manifest;
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

// The manifest a generation directory was fetched for: root/gen-NNNNNN.manifest.
fs::path manifest_path(const fs::path& root, uint64_t generation) {
  return root / (generation_dir_name(generation) + ".manifest");
}

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The files this leaf wants must fit the file system with 64 MiB to spare.
void check_space(const fs::path& root, const std::vector<const GenerationFile*>& files, uint64_t generation) {
  uint64_t wanted = 0;
  for (const GenerationFile* file : files) wanted += file->size;
  struct statvfs space {};
  if (::statvfs(root.c_str(), &space) != 0) return;  // unknown: the writes will tell
  const uint64_t available = static_cast<uint64_t>(space.f_bavail) * space.f_frsize;
  constexpr uint64_t kSpare = 64ull << 20;
  if (wanted + kSpare > available) {
    throw GenerationRefused(RefusalReason::kNoSpace, "generation " + std::to_string(generation) + " needs " +
                                                         std::to_string(wanted) + " bytes; " + root.string() + " has " +
                                                         std::to_string(available) + " free");
  }
}

// One file into `target`, whole and matching its digest, or GenerationRefused / Error.
void fetch_file(zmq::socket_t& socket, const GenerationManifest& manifest, const GenerationFile& file,
                const fs::path& target, const FetchOptions& options, FetchStats& stats) {
  for (int attempt = 0; attempt < options.max_attempts; ++attempt) {
    if (attempt > 0) ++stats.retries;
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    std::string data;
    for (uint64_t offset = 0; offset < file.size; offset += options.chunk_bytes) {
      const uint32_t length = static_cast<uint32_t>(std::min<uint64_t>(options.chunk_bytes, file.size - offset));
      if (!fetch_chunk(socket, manifest.generation, file, offset, length, options, data, stats)) {
        throw Error("fetching " + file.path + " of generation " + std::to_string(manifest.generation) + " from " +
                    manifest.fetch_endpoint + ": no valid reply for the chunk at " + std::to_string(offset) +
                    " after " + std::to_string(options.max_attempts) + " attempts");
      }
      out.write(data.data(), static_cast<std::streamsize>(data.size()));
      stats.bytes += data.size();
      ++stats.chunks;
    }
    out.close();
    if (!out) throw Error("cannot write " + target.string());
    if (sha256_of_file(target.string()) == file.sha256) return;
  }
  throw GenerationRefused(RefusalReason::kDigest, file.path + " of generation " + std::to_string(manifest.generation) +
                                                      " does not match its SHA-256 in the manifest after " +
                                                      std::to_string(options.max_attempts) + " fetches");
}

}  // namespace

std::string fetch_generation(const GenerationManifest& manifest, const std::string& root, const FetchOptions& options,
                             FetchStats& stats) {
  const std::string name = generation_dir_name(manifest.generation);
  const fs::path final_dir = fs::path(root) / name;
  const fs::path signed_copy = manifest_path(root, manifest.generation);
  if (fs::exists(final_dir)) {
    if (fs::exists(signed_copy) && read_whole(signed_copy) == manifest.bytes) return final_dir.string();
    fs::remove_all(final_dir);  // fetched for another manifest of this number, or not to its end
  }
  const fs::path partial = fs::path(root) / (name + ".partial-" + std::to_string(::getpid()));
  fs::create_directories(root);
  for (const auto& entry : fs::directory_iterator(root)) {  // left by a fetcher that was killed
    if (entry.path().filename().string().rfind(name + ".partial-", 0) == 0) fs::remove_all(entry.path());
  }
  std::vector<const GenerationFile*> wanted;
  for (const GenerationFile& file : manifest.files) {
    if (wanted_file(file.path, options.partitions)) wanted.push_back(&file);
  }
  check_space(root, wanted, manifest.generation);
  fs::create_directories(partial);
  try {
    zmq::context_t context(1);
    zmq::socket_t socket(context, zmq::socket_type::dealer);
    socket.set(zmq::sockopt::linger, 0);
    if (options.curve.enabled()) make_curve_client(socket, options.curve, curve_server_key(options.curve, "indexer"));
    socket.connect(manifest.fetch_endpoint);
    for (const GenerationFile* file : wanted) {
      const fs::path target = partial / file->path;
      fs::create_directories(target.parent_path());
      fetch_file(socket, manifest, *file, target, options, stats);
    }
    fs::rename(partial, final_dir);  // the generation appears whole or not at all
    const fs::path signed_tmp = signed_copy.string() + ".tmp";
    std::ofstream(signed_tmp, std::ios::binary | std::ios::trunc) << manifest.bytes;
    fs::rename(signed_tmp, signed_copy);
  } catch (...) {
    fs::remove_all(partial);
    throw;
  }
  return final_dir.string();
}

void prune_generations(const std::string& root, const std::vector<uint64_t>& keep) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    std::string name = entry.path().filename().string();
    if (name.size() > 9 && name.compare(name.size() - 9, 9, ".manifest") == 0) name.resize(name.size() - 9);
    const std::optional<uint64_t> generation = parse_generation_dir_name(name);
    if (generation && std::find(keep.begin(), keep.end(), *generation) == keep.end())
      fs::remove_all(entry.path(), error);
  }
}

}  // namespace warp::transfer
