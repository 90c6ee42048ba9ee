# Broker → indexer: documents put and deleted through the API (indexer/writes/). A request is one
# frame on the indexer's write socket (ZeroMQ DEALER → ROUTER); its reply comes once the ops are
# durable in the write log. Fields are only ever added, with new numbers.
@0xb7f3c2a9d4e15086;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("warp::protocol");

struct WriteOp {
  kind @0 :UInt8;        # 1 put, 2 delete
  id @1 :Text;
  document @2 :Text;     # put: the document as one JSON object, the fields the JSONL reader takes
}

struct WriteRequest {
  requestId @0 :UInt64;  # echoed in the reply
  ops @1 :List(WriteOp); # empty: only the log's state is asked for
}

struct WriteReply {
  requestId @0 :UInt64;
  lastSequence @1 :UInt64;    # of the request's last op; with no ops, the log's last
  foldedSequence @2 :UInt64;  # the latest generation holds every write up to this one
  error @3 :Text;             # empty on success; else nothing of the request was kept
  full @4 :Bool;              # the error is a full disk
  results @5 :List(UInt8);    # by op: 1 created, 2 replaced (puts), 3 deleted, 4 not found (deletes)
  behind @6 :Bool;            # refused: the leaves have applied too little of the log (retry later)
}

# Indexer → leaves: the write log as leaves apply it (indexer/writes/tail_endpoint.hpp). A leaf
# asks for the writes after the last it holds (ZeroMQ DEALER → the indexer's tail ROUTER); the
# reply comes at once when there are some, else when the next commit brings some or the wait ends.

struct TailRequest {
  after @0 :UInt64;       # the last sequence the leaf holds
  waitMs @1 :UInt32;      # how long the indexer may hold the request when nothing is newer
  maxWrites @2 :UInt32;   # at most this many writes in the reply
  encoded @3 :Bool;       # the reply's writes as `encodedWrites` (each encoded once by the indexer)
}

# One logged op with what BM25 needs of it, computed by the indexer over the whole collection.
struct LoggedWrite {
  sequence @0 :UInt64;
  kind @1 :UInt8;                 # 1 put, 2 delete
  id @2 :Text;
  title @3 :Text;                 # put: as stored for replies
  url @4 :Text;
  terms @5 :List(Text);           # put: its distinct analyzed terms
  freqs @6 :List(UInt32);         # put: each term's frequency in it
  length @7 :UInt32;              # put: its analyzed terms
  docCount @8 :UInt64;            # the collection's N after this op
  totalLength @9 :UInt64;         # and its sum of lengths
  dfTerms @10 :List(Text);        # the terms whose document frequency this op changed, and a put's terms
  dfValues @11 :List(UInt64);     # their document frequency after it
  loggedUnixNs @12 :UInt64;       # when the indexer had it durable (the leaves' apply delay counts from it)
  source @13 :Text;               # put: the document as written (what a fetch of it returns)
  tokens @14 :List(UInt32);       # put: its analyzed words in order, each an index into `terms`
  titleTokens @15 :UInt32;        # put: how many of `tokens` are the title's (the body's follow)
}

struct TailReply {
  writes @0 :List(LoggedWrite);   # in sequence order, the first right after the request's `after`
  # The generation the indexer's statistics were computed over: a leaf applies the writes only on
  # a generation at least as new (the same inputs); writes of another epoch replace what it holds.
  epoch @1 :UInt64;
  firstKept @2 :UInt64;           # the oldest write the indexer can still send (older: take a newer generation)
  last @3 :UInt64;                # the log's last durable sequence
  error @4 :Text;
  # Asked for with `encoded`: the writes, each a LoggedWrite message of its own (flat, one
  # segment), as the indexer encoded it once for every leaf, instead of `writes`.
  encodedWrites @5 :List(Data);
}
