#!/usr/bin/env python3
"""List the Argument union tags used in the model JSON of `.pt2` archives.

Usage:
    python recipes/arg_tags.py golden/models golden/legacy [more dirs or files]

Counts, over all nodes (nested cond/map subgraphs included):
  * `inputs`  : the tag of each node input's `arg` (top level of NamedArgument.arg)
  * `outputs` : the tag of each node output
  * `nested`  : tags found inside list-like args (as_optional_tensors, ...)
Standard library only. Broken archives are skipped with a message.
"""

import collections
import json
import os
import sys
import zipfile


def model_json(path):
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        for cand in names:
            if cand.endswith("/models/model.json") or cand == "serialized_exported_program.json":
                return json.loads(z.read(cand))
    raise ValueError("no model json")


def main():
    paths = []
    for p in sys.argv[1:]:
        if os.path.isdir(p):
            paths += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".pt2"))
        else:
            paths.append(p)
    ins, outs, nested = collections.Counter(), collections.Counter(), collections.Counter()

    def walk_graph(g):
        for node in g["nodes"]:
            for inp in node["inputs"]:
                arg = inp["arg"]
                (tag,) = arg.keys()
                ins[tag] += 1
                val = arg[tag]
                if tag == "as_graph":
                    walk_graph(val["graph"])
                elif isinstance(val, list):
                    for v in val:
                        if isinstance(v, dict) and len(v) == 1:
                            nested[f"{tag}[{next(iter(v))}]"] += 1
                elif tag in ("as_sym_int", "as_sym_bool", "as_sym_float", "as_optional_tensor"):
                    nested[f"{tag}[{next(iter(val))}]"] += 1
            for o in node["outputs"]:
                outs[next(iter(o))] += 1

    for p in paths:
        try:
            walk_graph(model_json(p)["graph_module"]["graph"])
        except Exception as e:  # noqa: BLE001
            print(f"skip {p}: {type(e).__name__}: {e}", file=sys.stderr)
    print(f"archives: {len(paths)}")
    print("inputs :", dict(ins.most_common()))
    print("outputs:", dict(outs.most_common()))
    print("nested :", dict(nested.most_common()))


if __name__ == "__main__":
    main()
