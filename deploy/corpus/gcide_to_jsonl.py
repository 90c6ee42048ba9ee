#!/usr/bin/env python3
"""Converts the GNU Collaborative International Dictionary of English (Debian package dict-gcide,
/usr/share/dictd/gcide.{index,dict.dz}) into Warpsearch JSONL: one document per dictionary entry,
{"id": "gcide-<n>", "title": headword, "body": entry text, "pos", "letter", "obsolete", "senses"}:
the entry's first part of speech as written after its pronunciation without spaces or the last dot
("n", "a", "v.t", "prop.n"; absent where none is written), the headword's first letter ("a".."z",
else "#"), whether the entry is marked [Obs.] and how many numbered senses it has (at least 1):
fields for the local cluster's filters and facets (docs/api.md#filters-and-facets). The .dict.dz
file is gzip-compatible.

usage: gcide_to_jsonl.py [--dictd DIR] [--limit N] OUT.jsonl
"""
import argparse
import gzip
import json
import os
import re
import sys

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
B64_VALUE = {c: i for i, c in enumerate(B64)}


def b64_number(text):
    value = 0
    for c in text:
        value = value * 64 + B64_VALUE[c]
    return value


def clean(entry):
    # dictd markup: {cross references}, \pronunciation\, [aum]-style character escapes.
    entry = re.sub(r"\[([a-z]{2,5})\]", "", entry)
    entry = entry.replace("{", "").replace("}", "")
    return re.sub(r"[ \t]*\n[ \t]*", "\n", entry).strip()


POS = re.compile(r"\\[^\\\n]*\\,?\s*((?:[a-z]+\.\s*){1,2})")
SENSE = re.compile(r"^\d+\.\s", re.MULTILINE)


def entry_fields(headword, body):
    """The entry's fields for filters and facets (see the module's docstring)."""
    out = {}
    pos = POS.search(body)
    if pos:
        out["pos"] = re.sub(r"\s+", "", pos.group(1)).rstrip(".")
    first = headword[:1].lower()
    out["letter"] = first if "a" <= first <= "z" else "#"
    out["obsolete"] = "[Obs.]" in body
    out["senses"] = max(1, len(SENSE.findall(body)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--dictd", default="/usr/share/dictd")
    parser.add_argument("--limit", type=int, default=0, help="stop after N entries (0: all)")
    args = parser.parse_args()
    index_path = os.path.join(args.dictd, "gcide.index")
    data_path = os.path.join(args.dictd, "gcide.dict.dz")
    if not os.path.exists(index_path):
        sys.exit(f"{index_path} not found: install the dict-gcide package (deploy/install-deps.sh)")
    with gzip.open(data_path) as f:
        data = f.read()
    seen = set()
    written = 0
    tmp = args.out + ".tmp"
    with open(index_path, encoding="utf-8", errors="replace") as index, open(tmp, "w", encoding="utf-8") as out:
        for line in index:
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 3 or fields[0].startswith("00-"):
                continue  # database info entries
            headword, offset, length = fields[0], b64_number(fields[1]), b64_number(fields[2])
            if offset in seen:
                continue  # several headwords may share one entry
            seen.add(offset)
            body = clean(data[offset:offset + length].decode("utf-8", errors="replace"))
            written += 1
            doc = {"id": f"gcide-{written}", "title": headword, "body": body}
            doc.update(entry_fields(headword, body))
            out.write(json.dumps(doc, ensure_ascii=False))
            out.write("\n")
            if args.limit and written >= args.limit:
                break
    os.replace(tmp, args.out)
    print(f"wrote {written} documents ({os.path.getsize(args.out) / 1e6:.1f} MB) to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
