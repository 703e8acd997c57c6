#!/usr/bin/env python3
"""Write `mlp` in the two older `.pt2` layouts that torch 2.15 still loads.

Usage:
    python recipes/make_legacy.py --models golden/models --out golden/legacy

The ExportedProgram is taken from DIR/mlp.pt2 with torch.export.load, so the
weights are bit-identical to mlp.pt2. The JSON is produced by torch's own
serializer (`torch._export.serde.serialize.serialize`), i.e. schema 8.20.

(A) legacy_zip_mlp.pt2: the plain-zip layout of torch <= 2.7 (what
    torch.export.save did then, reproduced from its source):
        zipfile.ZipFile(f, "w")   (ZIP_STORED, no root folder, no alignment)
          serialized_exported_program.json
          serialized_state_dict.pt        torch.save(ep.state_dict)
          serialized_constants.pt         torch.save(ep.constants)
          serialized_example_inputs.pt    torch.save((args, kwargs))
          version                         "8.20"  ("<major>.<minor>"; load checks len==2 and major)
    torch 2.15 load(): load_pt2 fails (not in a subdirectory), then the
    "older format" branch of torch.export.load reads these members.

(B) legacy_pickled_mlp.pt2: the PT2 archive layout (root folder
    `legacy_pickled_mlp/`, written by torch's PT2ArchiveWriter, so with
    64-byte alignment and the archive_format/archive_version/... records),
    but with the pre-"raw payload" weights (torch 2.8-era, PR #152495):
          models/model.json
          data/weights/model.pt           torch.save(ep.state_dict), no weights config
          data/constants/model.pt         torch.save(ep.constants),  no constants config
          data/sample_inputs/model.pt
    torch 2.15 logs "You are loading weight from the legacy format" and loads it.

Both are loaded back with torch.export.load and their outputs compared with
mlp.expected.npz.
"""

import argparse
import os
import zipfile

import numpy as np
import torch
from torch._export.serde.schema import SCHEMA_VERSION
from torch._export.serde.serialize import serialize
from torch.export.pt2_archive._package import PT2ArchiveWriter
from torch.export.pt2_archive.constants import (
    CONSTANTS_DIR,
    MODELS_FILENAME_FORMAT,
    SAMPLE_INPUTS_FILENAME_FORMAT,
    WEIGHTS_DIR,
)


def write_legacy_zip(ep, path):
    artifact = serialize(ep)
    with zipfile.ZipFile(path, "w") as zipf:
        zipf.writestr("serialized_exported_program.json", artifact.exported_program)
        zipf.writestr("serialized_state_dict.pt", artifact.state_dict)
        zipf.writestr("serialized_constants.pt", artifact.constants)
        zipf.writestr("serialized_example_inputs.pt", artifact.example_inputs)
        zipf.writestr("version", ".".join(map(str, SCHEMA_VERSION)))


def write_legacy_pickled(ep, path, model_name="model"):
    artifact = serialize(ep)
    with PT2ArchiveWriter(path) as w:
        w.write_bytes(MODELS_FILENAME_FORMAT.format(model_name), artifact.exported_program)
        w.write_bytes(os.path.join(WEIGHTS_DIR, f"{model_name}.pt"), artifact.state_dict)
        w.write_bytes(os.path.join(CONSTANTS_DIR, f"{model_name}.pt"), artifact.constants)
        w.write_bytes(SAMPLE_INPUTS_FILENAME_FORMAT.format(model_name), artifact.example_inputs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    ep = torch.export.load(os.path.join(a.models, "mlp.pt2"))
    x = torch.from_numpy(np.load(os.path.join(a.models, "mlp.inputs.npz"))["x"])
    want = np.load(os.path.join(a.models, "mlp.expected.npz"))["out_0"]

    pa = os.path.join(a.out, "legacy_zip_mlp.pt2")
    pb = os.path.join(a.out, "legacy_pickled_mlp.pt2")
    write_legacy_zip(ep, pa)
    write_legacy_pickled(ep, pb)

    ok = True
    for p in (pa, pb):
        with zipfile.ZipFile(p) as z:
            names = z.namelist()
        loaded = torch.export.load(p)
        with torch.no_grad():
            got = loaded.module()(x).numpy()
        same_w = all(torch.equal(loaded.state_dict[k], v) for k, v in ep.state_dict.items())
        diff = float(np.abs(got - want).max())
        ok &= diff == 0.0 and same_w
        print(f"{os.path.basename(p)}: {os.path.getsize(p)} bytes, members={names}")
        print(f"  torch.export.load OK; weights equal to mlp.pt2: {same_w}; "
              f"max |out - mlp.expected| = {diff}")
    if not ok:
        raise SystemExit("legacy archives do not reproduce mlp")


if __name__ == "__main__":
    main()
