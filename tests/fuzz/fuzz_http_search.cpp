// libFuzzer: bytes a client could send, parsed by Beast as the broker's server parses them, then
// through the broker's real handler: validation, analysis, result cache and a fan-out to a cluster
// whose only leaf is unreachable (so every query ends as a partial answer at once). Fails on a
// crash, a sanitizer report, an answer that never comes, an unexpected status or a JSON body that
// does not parse.
#include <utility>  // before Boost.Asio with GCC 12 in C++20

#include <boost/beast/http.hpp>
#include <cstdlib>
#include <future>
#include <nlohmann/json.hpp>

#include "broker/search_api.hpp"

namespace {

struct Broker {
  warp::Cluster cluster{{"0=tcp://127.0.0.1:9"}};
  warp::ResultCache cache{1 << 20, std::chrono::minutes(1)};
  warp::http::IoPool pool{1};
  warp::SearchApi api{warp::SearchApiOptions{}, cluster, cache, std::make_shared<prometheus::Registry>(), pool};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Broker* broker = new Broker();  // never destroyed: libFuzzer exits without unwinding
  namespace beast = boost::beast;
  beast::http::request_parser<beast::http::string_body> parser;
  parser.header_limit(8192 + 3 * 16384);
  parser.body_limit(8192 + 6 * 16384);
  parser.eager(true);
  beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return 0;  // the server answers such input 400 itself
  const auto& message = parser.get();
  warp::http::Request request;  // as the server's Session::on_read builds it
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  if (auto it = message.find(beast::http::field::authorization); it != message.end())
    request.authorization = std::string(it->value());
  request.body = message.body();
  warp::http::parse_target(request);
  std::promise<warp::http::Response> answer;
  broker->api.handle(request, [&](warp::http::Response response) { answer.set_value(std::move(response)); });
  auto future = answer.get_future();
  if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) std::abort();  // no answer: a hang
  const warp::http::Response response = future.get();
  if (response.status != 200 && response.status != 400 && response.status != 404 && response.status != 405 &&
      response.status != 503) {
    std::abort();
  }
  if (response.content_type == "application/json") (void)nlohmann::json::parse(response.body);  // throws: abort
  return 0;
}
