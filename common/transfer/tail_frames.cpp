#include "common/transfer/tail_frames.hpp"

#include <algorithm>

#include "common/protocol/write.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/util/parallel_tasks.hpp"
#include "common/util/status.hpp"

namespace warp::transfer {

namespace {
constexpr size_t kDecodeThreads = 4;
constexpr size_t kWritesASlice = 256;
capnp::Text::Reader text(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }

void set_write(protocol::LoggedWrite::Builder out, const LoggedWrite& w) {
  out.setSequence(w.sequence);
  out.setKind(static_cast<uint8_t>(w.kind));
  out.setId(text(w.id));
  out.setTitle(text(w.title));
  out.setUrl(text(w.url));
  out.setSource(text(w.source));
  out.setLength(w.length);
  out.setDocCount(w.doc_count);
  out.setTotalLength(w.total_length);
  out.setLoggedUnixNs(w.logged_unix_ns);
  auto terms = out.initTerms(static_cast<unsigned>(w.terms.size()));
  auto freqs = out.initFreqs(static_cast<unsigned>(w.terms.size()));
  for (unsigned t = 0; t < w.terms.size(); ++t) terms.set(t, text(w.terms[t].first)), freqs.set(t, w.terms[t].second);
  auto tokens = out.initTokens(static_cast<unsigned>(w.tokens.size()));
  for (unsigned t = 0; t < w.tokens.size(); ++t) tokens.set(t, w.tokens[t]);
  out.setTitleTokens(w.title_tokens);
  auto df_terms = out.initDfTerms(static_cast<unsigned>(w.df.size()));
  auto df_values = out.initDfValues(static_cast<unsigned>(w.df.size()));
  for (unsigned t = 0; t < w.df.size(); ++t) df_terms.set(t, text(w.df[t].first)), df_values.set(t, w.df[t].second);
}

LoggedWrite read_write(protocol::LoggedWrite::Reader in) {
  LoggedWrite w;
  w.sequence = in.getSequence();
  if (in.getKind() != 1 && in.getKind() != 2) throw Error("a logged write of unknown kind");
  w.kind = static_cast<LoggedWrite::Kind>(in.getKind());
  w.id = in.getId();
  w.title = in.getTitle();
  w.url = in.getUrl();
  w.source = in.getSource();
  w.length = in.getLength();
  w.doc_count = in.getDocCount();
  w.total_length = in.getTotalLength();
  w.logged_unix_ns = in.getLoggedUnixNs();
  auto terms = in.getTerms();
  auto freqs = in.getFreqs();
  if (terms.size() != freqs.size()) throw Error("a logged write whose terms and frequencies differ in number");
  for (unsigned t = 0; t < terms.size(); ++t) w.terms.emplace_back(terms[t], freqs[t]);
  auto tokens = in.getTokens();
  if (tokens.size() != 0 && (tokens.size() != w.length || in.getTitleTokens() > tokens.size()))
    throw Error("a logged write whose words in order do not match its length");
  w.tokens.reserve(tokens.size());
  for (uint32_t token : tokens) {
    if (token >= w.terms.size()) throw Error("a logged write with a word in order that is none of its terms");
    w.tokens.push_back(token);
  }
  w.title_tokens = tokens.size() != 0 ? in.getTitleTokens() : 0;
  auto df_terms = in.getDfTerms();
  auto df_values = in.getDfValues();
  if (df_terms.size() != df_values.size()) throw Error("a logged write whose df terms and values differ in number");
  for (unsigned t = 0; t < df_terms.size(); ++t) w.df.emplace_back(df_terms[t], df_values[t]);
  return w;
}

void set_header(protocol::TailReply::Builder reply, const TailAnswer& answer) {
  reply.setEpoch(answer.epoch);
  reply.setFirstKept(answer.first_kept);
  reply.setLast(answer.last);
  reply.setError(text(answer.error));
}
}  // namespace

zmq::message_t tail_request_frame(uint64_t after, uint32_t wait_ms, uint32_t max_writes, bool encoded) {
  capnp::MallocMessageBuilder builder;
  auto request = builder.initRoot<protocol::TailRequest>();
  request.setAfter(after);
  request.setWaitMs(wait_ms);
  request.setMaxWrites(max_writes);
  request.setEncoded(encoded);
  return to_frame(builder);
}

zmq::message_t tail_reply_frame(const TailAnswer& answer) {
  capnp::MallocMessageBuilder builder;
  auto reply = builder.initRoot<protocol::TailReply>();
  set_header(reply, answer);
  auto writes = reply.initWrites(static_cast<unsigned>(answer.writes.size()));
  for (unsigned i = 0; i < answer.writes.size(); ++i) set_write(writes[i], answer.writes[i]);
  return to_frame(builder);
}

std::string encode_logged_write(const LoggedWrite& write) {
  capnp::MallocMessageBuilder builder;
  set_write(builder.initRoot<protocol::LoggedWrite>(), write);
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  const auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

LoggedWrite decode_logged_write(std::string_view encoded) {
  FrameReader reader(encoded.data(), encoded.size());
  return read_write(reader.root<protocol::LoggedWrite>());
}

zmq::message_t tail_reply_frame(const TailAnswer& answer, const std::vector<std::string_view>& encoded) {
  size_t bytes = 0;
  for (std::string_view write : encoded) bytes += write.size();
  capnp::MallocMessageBuilder builder(static_cast<unsigned>(bytes / sizeof(capnp::word) + 64 + encoded.size()));
  auto reply = builder.initRoot<protocol::TailReply>();
  set_header(reply, answer);
  auto writes = reply.initEncodedWrites(static_cast<unsigned>(encoded.size()));
  for (unsigned i = 0; i < encoded.size(); ++i)
    writes.set(i, capnp::Data::Reader(reinterpret_cast<const kj::byte*>(encoded[i].data()), encoded[i].size()));
  return to_frame(builder);
}

TailAnswer read_tail_reply(const zmq::message_t& frame, uint64_t after) {
  FrameReader reader(frame);
  auto reply = reader.root<protocol::TailReply>();
  TailAnswer answer;
  answer.epoch = reply.getEpoch();
  answer.first_kept = reply.getFirstKept();
  answer.last = reply.getLast();
  answer.error = reply.getError();
  for (auto in : reply.getWrites()) answer.writes.push_back(read_write(in));
  const auto encoded = reply.getEncodedWrites();
  if (encoded.size() > 0) {
    // Decoded in slices on a few threads when there are many (a leaf catching up reads thousands).
    const size_t first = answer.writes.size(), count = encoded.size();
    answer.writes.resize(first + count);
    const size_t slices = std::min<size_t>(kDecodeThreads, count / kWritesASlice + 1);
    const auto decode = [&](size_t slice) {
      for (size_t i = count * slice / slices; i < count * (slice + 1) / slices; ++i) {
        const auto in = encoded[static_cast<unsigned>(i)];
        answer.writes[first + i] =
            decode_logged_write(std::string_view(reinterpret_cast<const char*>(in.begin()), in.size()));
      }
    };
    if (slices == 1)
      decode(0);
    else
      run_parallel_tasks(slices, slices, decode);
  }
  uint64_t expected = after + 1;
  for (const LoggedWrite& w : answer.writes) {
    if (w.sequence != expected)
      throw Error("a write-log tail with sequence " + std::to_string(w.sequence) + " where " +
                  std::to_string(expected) + " was due");
    ++expected;
  }
  return answer;
}

}  // namespace warp::transfer
