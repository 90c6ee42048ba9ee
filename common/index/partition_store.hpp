// A partition on disk is one RocksDB database with four column families:
//   meta       format version, analyzer version, generation, partition id, docID range, codec,
//              BM25 parameters, collection statistics, document lengths, content checksum
//   lexicon    term → df, cf, list size, CRC-32 of the list
//   postings   term → the encoded posting list (large values go to RocksDB blob files)
//   documents  docID (big-endian) → external id, title, url, length
// Beside them, WARP-CHECKSUMS lists every file of the database (LOG and LOCK aside) with its size
// and CRC-32: open_partition checks the files against it before RocksDB reads a byte, so a
// damaged file is refused with its name rather than reaching RocksDB's parsers (which assert on
// some damage and would take the process down). Then it verifies everything it loads and
// refuses, with a message naming the partition and the cause, a partition whose checksums,
// format version or analyzer do not match.
#pragma once
// The partition's parts, each in a header of its own: the writers (SstRows, PartitionAssembly,
// write_partition, seal_partition), the reader (open_partition, Partition) and the digest.
#include "common/index/partition_digest.hpp"
#include "common/index/partition_reader.hpp"
#include "common/index/partition_writer.hpp"
