#include "indexer/publisher.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/protocol/publish.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/util/checksum.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace fs = std::filesystem;

struct Publisher::Sockets {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
  zmq::socket_t router{context, zmq::socket_type::router};
  std::unique_ptr<transfer::ZapAuthenticator> zap;  // with Curve: before the binds, gone before the context
};

Publisher::Publisher(PublisherOptions options) : options_(std::move(options)), sockets_(std::make_unique<Sockets>()) {
  try {
    sockets_->pub.set(zmq::sockopt::linger, 0);
    sockets_->router.set(zmq::sockopt::linger, 0);
    if (options_.curve.enabled()) {
      sockets_->zap = std::make_unique<transfer::ZapAuthenticator>(sockets_->context, options_.curve.allowed);
      transfer::make_curve_server(sockets_->pub, options_.curve);
      transfer::make_curve_server(sockets_->router, options_.curve);
    }
    sockets_->pub.bind(options_.publish_endpoint);
    sockets_->router.bind(options_.fetch_endpoint);
  } catch (const zmq::error_t& e) {
    throw Error("publisher: cannot bind " + options_.publish_endpoint + " / " + options_.fetch_endpoint + ": " +
                e.what());
  }
  publish_endpoint_ = sockets_->pub.get(zmq::sockopt::last_endpoint);
  fetch_endpoint_ = sockets_->router.get(zmq::sockopt::last_endpoint);
  thread_ = std::thread([this] { serve(); });
}

Publisher::~Publisher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void Publisher::announce(uint64_t generation) {
  const fs::path dir = fs::path(options_.root) / transfer::generation_dir_name(generation);
  if (!fs::exists(dir / "manifest.json")) throw Error("publisher: " + dir.string() + " is not a complete generation");
  std::vector<transfer::GenerationFile> files = transfer::list_generation_files(dir.string());
  uint32_t partitions = 0;
  for (const auto& file : files) {
    if (file.path.rfind("part-", 0) == 0 && file.path.find("/CURRENT") != std::string::npos) ++partitions;
  }
  transfer::SignedManifest manifest =
      transfer::sign_manifest(generation, partitions, fetch_endpoint_, std::move(files), options_.signing_key);
  std::lock_guard<std::mutex> lock(mutex_);
  generations_[generation] = std::move(manifest);
  latest_ = std::max(latest_, generation);
  announce_now_ = true;
}

void Publisher::forget(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (generation != latest_) generations_.erase(generation);
}

void Publisher::serve() {
  auto last_announcement = std::chrono::steady_clock::now() - std::chrono::hours(1);
  while (!stop_) {
    {  // announcements: at once when asked, then every second
      std::unique_lock<std::mutex> lock(mutex_);
      const auto now = std::chrono::steady_clock::now();
      if (latest_ > 0 && (announce_now_ || now - last_announcement > std::chrono::seconds(1))) {
        capnp::MallocMessageBuilder builder;
        auto message = builder.initRoot<protocol::GenerationAnnouncement>();
        message.setGeneration(latest_);
        message.setFetchEndpoint(fetch_endpoint_);
        const transfer::SignedManifest& signed_manifest = generations_[latest_];
        const auto& files = signed_manifest.manifest.files;
        auto list = message.initFiles(static_cast<unsigned>(files.size()));
        for (size_t i = 0; i < files.size(); ++i) {
          list[i].setPath(files[i].path);
          list[i].setSize(files[i].size);
          list[i].setCrc32(files[i].crc32);
        }
        message.setPartitions(signed_manifest.manifest.partitions);
        const auto bytes = [](const std::string& text) {
          return kj::arrayPtr(reinterpret_cast<const kj::byte*>(text.data()), text.size());
        };
        message.setManifest(bytes(signed_manifest.manifest.bytes));
        message.setSignature(bytes(signed_manifest.signature));
        announce_now_ = false;
        lock.unlock();
        sockets_->pub.send(zmq::buffer(std::string_view("generation")), zmq::send_flags::sndmore);
        sockets_->pub.send(transfer::to_frame(builder), zmq::send_flags::none);
        ++counters_.announcements;
        last_announcement = now;
      }
    }
    zmq::pollitem_t item{sockets_->router.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
    zmq::message_t identity, body;
    if (!sockets_->router.recv(identity) || !identity.more() || !sockets_->router.recv(body)) continue;
    bool extra = false;
    while (body.more() && sockets_->router.recv(body)) extra = true;  // a request is one frame
    if (extra) {
      ++counters_.bad_requests;
      continue;
    }
    ++counters_.fetch_requests;
    capnp::MallocMessageBuilder builder;
    answer_fetch(body, builder);
    sockets_->router.send(identity, zmq::send_flags::sndmore);
    sockets_->router.send(transfer::to_frame(builder), zmq::send_flags::none);
  }
}

void Publisher::answer_fetch(const zmq::message_t& body, capnp::MallocMessageBuilder& builder) {
  auto response = builder.initRoot<protocol::FetchResponse>();
  try {
    transfer::FrameReader frame(body);
    auto request = frame.root<protocol::FetchRequest>();
    const std::string path = request.getPath();
    response.setGeneration(request.getGeneration());
    response.setPath(path);
    response.setOffset(request.getOffset());
    bool known = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = generations_.find(request.getGeneration());
      if (it != generations_.end()) {
        for (const auto& file : it->second.manifest.files) known = known || file.path == path;
      }
    }
    if (!known)
      throw Error("no file '" + path + "' in an announced generation " + std::to_string(request.getGeneration()));
    const uint32_t length = std::min<uint32_t>(request.getLength(), 8u << 20);
    std::ifstream in(fs::path(options_.root) / transfer::generation_dir_name(request.getGeneration()) / path,
                     std::ios::binary);
    in.seekg(static_cast<std::streamoff>(request.getOffset()));
    std::string data(length, '\0');
    in.read(data.data(), length);
    data.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
    response.setCrc32(crc32_of(data));
    if (options_.corrupt_replies > 0 && !data.empty()) {
      --options_.corrupt_replies;
      data[data.size() / 2] ^= 0x20;  // after the checksum: the client must notice
    }
    response.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(data.data()), data.size()));
    counters_.bytes_served += data.size();
  } catch (const std::exception& e) {
    ++counters_.bad_requests;
    response.setError(e.what());
  }
}

}  // namespace warp
