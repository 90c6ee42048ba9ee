#include "common/transfer/curve.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/transfer/key_files.hpp"
#include "common/util/status.hpp"

namespace warp::transfer {
namespace fs = std::filesystem;
namespace {

std::string binary_key(const std::string& z85, const std::string& where) {
  if (z85.size() != 40) throw Error(where + ": a Curve key is 40 Z85 characters");
  std::string binary(32, '\0');
  if (zmq_z85_decode(reinterpret_cast<uint8_t*>(binary.data()), z85.c_str()) == nullptr) {
    throw Error(where + ": not a Z85 Curve key");
  }
  return binary;
}

std::string read_public_key(const fs::path& path) {
  std::ifstream in(path);
  std::string key;
  if (!(in >> key)) throw Error("cannot read the Curve public key " + path.string());
  binary_key(key, path.string());
  return key;
}

}  // namespace

CurveKeyPair generate_curve_key_pair() {
  char public_key[41], secret_key[41];
  if (zmq_curve_keypair(public_key, secret_key) != 0) throw Error("this libzmq has no CURVE support");
  return {public_key, secret_key};
}

void write_curve_key_pair(const std::string& dir, const std::string& name, const CurveKeyPair& pair) {
  fs::create_directories(dir);
  const fs::path public_file = fs::path(dir) / (name + ".pub");
  if (fs::exists(public_file))
    throw Error(public_file.string() + " exists: keys are never overwritten (remove it first, or use another --out)");
  write_new_file((fs::path(dir) / (name + ".key")).string(), 0600,
                 "public " + pair.public_key + "\nsecret " + pair.secret_key + "\n");
  write_new_file(public_file.string(), 0644, pair.public_key + "\n");
}

CurveConfig load_curve_config(const std::string& dir, const std::string& role, const std::string& client_role) {
  CurveConfig config;
  if (dir.empty()) return config;
  config.dir = dir;
  const fs::path key = fs::path(dir) / (role + ".key");
  std::ifstream in(key);
  std::string label;
  for (int i = 0; i < 2 && in >> label; ++i) {
    if (label == "public") in >> config.own.public_key;
    if (label == "secret") in >> config.own.secret_key;
  }
  if (!in) throw Error("cannot read the Curve key pair " + key.string() + " (make one with warp-indexer keys)");
  binary_key(config.own.public_key, key.string());
  binary_key(config.own.secret_key, key.string());
  if (!client_role.empty()) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(client_role, 0) == 0 && entry.path().extension() == ".pub") {
        config.allowed.push_back(read_public_key(entry.path()));
      }
    }
    if (config.allowed.empty()) throw Error("no " + client_role + "*.pub in " + dir + ": no client could connect");
  }
  return config;
}

std::string curve_server_key(const CurveConfig& config, const std::string& server_role) {
  return read_public_key(fs::path(config.dir) / (server_role + ".pub"));
}

void make_curve_server(zmq::socket_t& socket, const CurveConfig& config) {
  socket.set(zmq::sockopt::zap_domain, "warpsearch");
  socket.set(zmq::sockopt::curve_server, true);
  socket.set(zmq::sockopt::curve_secretkey, config.own.secret_key);
}

void make_curve_client(zmq::socket_t& socket, const CurveConfig& config, const std::string& server_key) {
  socket.set(zmq::sockopt::curve_serverkey, server_key);
  socket.set(zmq::sockopt::curve_publickey, config.own.public_key);
  socket.set(zmq::sockopt::curve_secretkey, config.own.secret_key);
}

ZapAuthenticator::ZapAuthenticator(zmq::context_t& context, std::vector<std::string> allowed_public_keys)
    : socket_(context, zmq::socket_type::rep) {
  for (const std::string& key : allowed_public_keys) allowed_.push_back(binary_key(key, "allow-list"));
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind("inproc://zeromq.zap.01");
  thread_ = std::thread([this] { serve(); });
}

ZapAuthenticator::~ZapAuthenticator() {
  stop_ = true;
  thread_.join();
}

// RFC 27: [version, request id, domain, address, identity, mechanism, credentials...] →
// [version, request id, status code, status text, user id, metadata].
void ZapAuthenticator::serve() {
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  while (!stop_) {
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(100));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> frames;
      do {
        frames.emplace_back();
        if (!socket_.recv(frames.back())) break;
      } while (frames.back().more());
      const bool well_formed = frames.size() >= 7 && frames[0].to_string() == "1.0" && frames[5].to_string() == "CURVE";
      const std::string client = well_formed ? frames[6].to_string() : "";
      const bool allowed = well_formed && std::find(allowed_.begin(), allowed_.end(), client) != allowed_.end();
      ++(allowed ? accepted_ : refused_);
      const std::string request_id = frames.size() > 1 ? frames[1].to_string() : "";
      socket_.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(std::string(allowed ? "200" : "400")), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(std::string(allowed ? "OK" : "unknown client key")), zmq::send_flags::sndmore);
      socket_.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
      socket_.send(zmq::str_buffer(""), zmq::send_flags::none);
    } catch (const std::exception&) {
      if (stop_) return;  // the context ends
    }
  }
}

}  // namespace warp::transfer
