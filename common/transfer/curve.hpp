// CurveZMQ between the services (docs/architecture.md: nodes authenticate each other). Each role (indexer,
// leaf, broker) has a key pair, shared by its replicas; a key directory (--curve-keys DIR) holds
// the process's own pair as ROLE.key, the public keys of the roles it connects to as ROLE.pub, and
// its allow-list: the servers accept exactly the clients whose public key is in a file named
// CLIENT_ROLE*.pub (a leaf accepts broker*.pub, the indexer leaf*.pub), checked by a ZAP handler
// (RFC 27) that also counts refusals. Rotating a client key: add the new CLIENT_ROLE-2.pub to every
// server's directory, move the clients to the new pair, remove the old file (read at start).
// `warp-indexer keys --out DIR` makes the pairs.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

namespace warp::transfer {

struct CurveKeyPair {
  std::string public_key, secret_key;  // Z85, 40 characters each
};

CurveKeyPair generate_curve_key_pair();
// DIR/NAME.key (the pair, created with mode 0600) and DIR/NAME.pub (the public key); throws Error,
// writing nothing, if either exists.
void write_curve_key_pair(const std::string& dir, const std::string& name, const CurveKeyPair& pair);

struct CurveConfig {
  std::string dir;                   // empty: Curve off
  CurveKeyPair own;                  // DIR/ROLE.key
  std::vector<std::string> allowed;  // public keys of DIR/CLIENT_ROLE*.pub
  bool enabled() const { return !dir.empty(); }
};

// Reads DIR/ROLE.key and, when `client_role` is given, the allow-list; throws Error naming the file.
CurveConfig load_curve_config(const std::string& dir, const std::string& role, const std::string& client_role = "");
// The public key of a role the process connects to: DIR/ROLE.pub.
std::string curve_server_key(const CurveConfig& config, const std::string& server_role);

// A server socket: CURVE with the process's own secret key, authenticated by the ZAP handler.
void make_curve_server(zmq::socket_t& socket, const CurveConfig& config);
// A client socket of `server_key` (Z85), presenting the process's own pair.
void make_curve_client(zmq::socket_t& socket, const CurveConfig& config, const std::string& server_key);

// The ZAP handler of a context: answers its server sockets' authentication requests from the
// allow-list. Create it before binding the server sockets; one per context.
class ZapAuthenticator {
 public:
  ZapAuthenticator(zmq::context_t& context, std::vector<std::string> allowed_public_keys);
  ~ZapAuthenticator();
  uint64_t refused() const { return refused_; }
  uint64_t accepted() const { return accepted_; }

 private:
  void serve();
  zmq::socket_t socket_;
  std::vector<std::string> allowed_;  // 32-byte binary keys
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0}, accepted_{0};
  std::thread thread_;
};

}  // namespace warp::transfer
