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
}
