# Broker ↔ leaf messages over ZeroMQ (broker DEALER → leaf ROUTER). Every request carries a
# deadline. Fields are only ever added, with new numbers, so peers of different versions read each
# other's messages (unknown fields ignored, absent ones default).
@0xe8a3c1d27b5f4096;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("warp::protocol");

enum Mode {
  and @0;
  or @1;
  andOr @2;
}

struct LeafRequest {
  union {
    search @0 :SearchRequest;
    status @1 :Void;
    documents @2 :DocumentsRequest;
    # A status request from a broker reading `generation` (every partition has it served or staged):
    # a leaf holding it staged serves it first.
    statusAt @3 :UInt64;
  }
}

# The fetch phase of a search (query then fetch: only the final page's hits, after the broker's
# merge) and the read of a document by id: stored forms and snippets from one partition.
struct DocumentsRequest {
  queryId @0 :UInt64;
  partition @1 :UInt32;
  docs @2 :List(UInt32);     # the hits' docIDs as the partition's search reply gave them
  ids @3 :List(Text);        # each one's external id; with no docs, the documents are looked up by id
  source @4 :Bool;           # each document's stored form
  terms @5 :List(Text);      # analyzed query terms to highlight; none: no snippet
  snippetField @6 :Text;     # the stored form's field the snippet is taken from
  snippetLength @7 :UInt32;  # characters
  preTag @8 :Text;
  postTag @9 :Text;
  deadlineMicros @10 :UInt64;
  phrases @11 :List(List(Text));  # analyzed phrases of the query, highlighted as one
  generation @12 :UInt64;         # the search's generation (SearchRequest.generation)
}

struct FetchedDocument {
  found @0 :Bool;            # the partition holds it now (a document deleted since the search: false)
  doc @1 :UInt32;
  id @2 :Text;
  source @3 :Text;           # asked for and kept: the stored form
  snippet @4 :Text;
  hasSnippet @5 :Bool;       # the field is in the stored form (snippet may still be empty: an empty field)
}

struct DocumentsReply {
  queryId @0 :UInt64;
  partition @1 :UInt32;
  generation @2 :UInt64;
  documents @3 :List(FetchedDocument);  # in the request's order
  error @4 :Text;
  writeSequence @5 :UInt64;  # the writes through the API the answer holds
}

struct SearchRequest {
  queryId @0 :UInt64;
  terms @1 :List(Text);   # analyzed by the broker with the cluster's analyzer
  mode @2 :Mode;
  k @3 :UInt32;
  partition @4 :UInt32;   # which of the leaf's partitions to search
  deadlineMicros @5 :UInt64;  # time budget from when the leaf receives it
  termCounts @6 :List(UInt32);  # each term's weight: how often the query holds it (absent: 1 each)
  # The query syntax's constraints (analyzed; no score): a document answered holds every required
  # term (each one of `terms` too) and not every term of any excluded group.
  required @7 :List(Text);
  excluded @8 :List(List(Text));
  # A filter over the index's columns (common/query/filter.hpp, as filter_text writes it; empty:
  # none): a document answered passes it. Like the constraints, it changes no score.
  filter @9 :Text;
  # Fields whose values to count over the documents the query matches (facets), and how many of
  # each field's values to list (the most frequent; the rest summed in `others`).
  facets @10 :List(Text);
  facetValues @11 :UInt32;
  # The query syntax's phrases (analyzed with their stop words, in order): a document answered
  # holds each of `phrases` as consecutive words and none of `excludedPhrases`.
  phrases @12 :List(List(Text));
  excludedPhrases @13 :List(List(Text));
  # The generation the broker reads, the newest every partition has served or staged (0: the one
  # served): a leaf holding it staged serves it first; one that served it last answers from it
  # while it keeps it. Every partition answers from one generation while leaves swap.
  generation @14 :UInt64;
  # Read-your-writes (the search's after=): the writes through the API the answer must hold; the
  # generation before is not answered from unless it holds them.
  after @15 :UInt64;
}

struct FacetValue {
  value @0 :Text;
  count @1 :UInt64;
}

struct FacetField {
  field @0 :Text;
  values @1 :List(FacetValue);
  others @2 :UInt64;       # documents' values not listed
  otherValues @3 :UInt64;  # distinct values not listed
}

struct Hit {
  doc @0 :UInt32;         # global docID
  score @1 :Float32;
  externalId @2 :Text;
  title @3 :Text;
  url @4 :Text;
  written @5 :Bool;       # written through the API since the generation (a segment's document)
}

struct SearchResponse {
  queryId @0 :UInt64;
  partition @1 :UInt32;
  generation @2 :UInt64;
  hits @3 :List(Hit);
  andMatches @4 :UInt64;
  postingsDecoded @5 :UInt64;
  blocksDecoded @6 :UInt64;
  blocksTotal @7 :UInt64;
  processor @8 :Text;
  micros @9 :UInt64;
  error @10 :Text;        # empty on success; "deadline exceeded", "no such partition", ...
  leafMicros @11 :UInt64; # from the leaf's front end reading the request to its reply built: its
                          # queues and the search (0 from leaves before this field)
  facets @12 :List(FacetField);  # as asked, in the request's order
  facetMatches @13 :UInt64;      # documents the query matches on the partition (with facets asked)
  facetError @14 :Text;          # facets asked for and not counted: why
}

struct LeafStatus {
  partitions @0 :List(UInt32);
  generation @1 :UInt64;
  analyzer @2 :Text;
  ready @3 :Bool;
  inFlight @4 :UInt32;
  searchPort @5 :UInt16;  # the leaf's direct search path (TCP, framed; Curve where ZeroMQ has it); 0: none
  writeSequence @6 :UInt64;  # the generation served holds every write through the API up to this one
  keywordFields @7 :List(Text);  # the index's columns (filters, facets)
  numericFields @8 :List(Text);
  positions @9 :Bool;  # every partition it serves keeps word positions (phrases)
  stagedGeneration @10 :UInt64;  # loaded and ready, served once a broker reads it (0: none)
}

struct LeafReply {
  union {
    search @0 :SearchResponse;
    status @1 :LeafStatus;
    documents @2 :DocumentsReply;
  }
}
