#!/usr/bin/env python3
"""Build deliberately broken `.pt2` archives from a good `mlp.pt2`.

Usage:
    python recipes/make_bad.py --models golden/models --out golden/bad

Every archive except `not_a_zip` and `truncated` is rewritten with Python's
zipfile (ZIP_STORED, same member names, same order, same `mlp/` root); only
the one damaged member differs. Note that Python's zipfile does not add the
64-byte "FB" alignment padding or data descriptors that torch's writer uses,
so these files are plain zips (a reader must not depend on alignment).

Files written (each is one failure mode a reader must report cleanly):
    not_a_zip.pt2              random printable text
    truncated.pt2              first 60% of the bytes of mlp.pt2
    missing_model_json.pt2     no <root>/models/model.json
    malformed_json.pt2         model.json cut in the middle
    unknown_schema_version.pt2 schema_version.major = 99
    unknown_arg_kind.pt2       first node's first input arg = {"as_quaternion": 1}
    weight_size_mismatch.pt2   first weight file 4 bytes short
    bad_archive_format.pt2     archive_format says "zip"
    pickled_weight.pt2         first weights-config entry has use_pickle: true
                               (its file is still raw bytes, so unpickling fails)
    unknown_value.pt2          a node input names a tensor that exists nowhere
    deep_json.pt2              a node input nested 100000 JSON arrays deep
    size_claim.pt2             model.json deflated, its size in the local
                               header and the directory claiming 4 GiB - 2
                               (a zip bomb's claim; no reader should
                               allocate or inflate it)
                               (a recursive parser without a limit overflows
                               its stack)
    aoti_package.pt2           the layout of an AOTInductor package
                               (torch._inductor.aoti_compile_and_package):
                               compiled code under data/aotinductor/, no
                               models/ (a fake .so; nothing is compiled)

Unless --no-check, each file is also loaded with torch's load_pt2
(the first step of torch.export.load)
and the outcome is printed (torch is imported only for that).
"""

import argparse
import io
import json
import os
import random
import zipfile


def read_members(path):
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def write_members(path, members):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)


def find(members, suffix):
    hits = [i for i, (n, _) in enumerate(members) if n.endswith(suffix)]
    assert len(hits) == 1, (suffix, hits)
    return hits[0]


def with_replaced(members, idx, data):
    out = list(members)
    out[idx] = (out[idx][0], data)
    return out


def dump_json(obj):
    # torch writes json.dumps(...) with default separators
    return json.dumps(obj).encode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-check", action="store_true")
    a = ap.parse_args()

    src = os.path.join(a.models, "mlp.pt2")
    os.makedirs(a.out, exist_ok=True)
    raw = open(src, "rb").read()
    members = read_members(src)
    i_model = find(members, "/models/model.json")
    model = json.loads(members[i_model][1])
    outs = {}

    # not_a_zip
    rng = random.Random(0)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz \n") for _ in range(2000))
    outs["not_a_zip"] = ("raw", text.encode())

    # truncated
    outs["truncated"] = ("raw", raw[: int(len(raw) * 0.6)])

    # missing_model_json
    outs["missing_model_json"] = ("zip", [m for i, m in enumerate(members) if i != i_model])

    # malformed_json
    mj = members[i_model][1]
    outs["malformed_json"] = ("zip", with_replaced(members, i_model, mj[: len(mj) // 2]))

    # unknown_schema_version
    m = json.loads(mj)
    m["schema_version"]["major"] = 99
    outs["unknown_schema_version"] = ("zip", with_replaced(members, i_model, dump_json(m)))

    # unknown_arg_kind: first input of the first node
    m = json.loads(mj)
    node = m["graph_module"]["graph"]["nodes"][0]
    node["inputs"][0]["arg"] = {"as_quaternion": 1}
    outs["unknown_arg_kind"] = ("zip", with_replaced(members, i_model, dump_json(m)))

    # weight_size_mismatch: the first data/weights/weight_* member
    i_w = [i for i, (n, _) in enumerate(members) if "/data/weights/weight_" in n][0]
    outs["weight_size_mismatch"] = ("zip", with_replaced(members, i_w, members[i_w][1][:-4]))

    # bad_archive_format
    i_fmt = find(members, "/archive_format")
    outs["bad_archive_format"] = ("zip", with_replaced(members, i_fmt, b"zip"))

    # pickled_weight
    i_cfg = find(members, "/data/weights/model_weights_config.json")
    cfg = json.loads(members[i_cfg][1])
    first = next(iter(cfg["config"]))
    cfg["config"][first]["use_pickle"] = True
    outs["pickled_weight"] = ("zip", with_replaced(members, i_cfg, dump_json(cfg)))

    # unknown_value: first as_tensor input of the first node that has one
    m = json.loads(mj)
    done = False
    for node in m["graph_module"]["graph"]["nodes"]:
        for inp in node["inputs"]:
            if "as_tensor" in inp["arg"]:
                inp["arg"] = {"as_tensor": {"name": "no_such_value"}}
                done = True
                break
        if done:
            break
    assert done
    outs["unknown_value"] = ("zip", with_replaced(members, i_model, dump_json(m)))

    # deep_json: the first node's first input, 100000 arrays deep
    nest = 100000
    deep = dump_json(m).replace(b'{"as_tensor": {"name": "no_such_value"}}', b"[" * nest + b"]" * nest, 1)
    outs["deep_json"] = ("zip", with_replaced(members, i_model, deep))

    # aoti_package: what aoti_compile_and_package writes (archive_format
    # "pt2" too), with stand-ins for the generated code.
    root = members[i_fmt][0].split("/")[0]
    keep = [m for m in members if m[0].split("/", 1)[1] in ("archive_format", "archive_version", "byteorder", "version")]
    aoti = f"{root}/data/aotinductor/model/"
    outs["aoti_package"] = ("zip", keep + [
        (aoti + "cmodel.wrapper.cpp", b"// generated by AOTInductor (stand-in)\n"),
        (aoti + "cmodel.wrapper.so", b"\x7fELF stand-in, never loaded"),
        (aoti + "cmodel_metadata.json", b'{"AOTI_DEVICE_KEY": "cpu"}'),
    ])

    # size_claim: model.json deflated, its uncompressed size patched
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        for i, (name, data) in enumerate(members):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if i == i_model else zipfile.ZIP_STORED
            z.writestr(info, data)
    raw_claim = bytearray(buf.getvalue())
    name = members[i_model][0].encode()
    claim = (0xFFFFFFFE).to_bytes(4, "little")
    patched = 0
    for sig, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = 0
        while (at := raw_claim.find(sig, at)) >= 0:
            name_at = at + (30 if sig == b"PK\x03\x04" else 46)
            if raw_claim[name_at:name_at + len(name)] == name:
                raw_claim[at + size_at:at + size_at + 4] = claim
                patched += 1
            at += 4
    assert patched == 2, patched
    outs["size_claim"] = ("raw", bytes(raw_claim))

    for name, (kind, payload) in outs.items():
        path = os.path.join(a.out, f"{name}.pt2")
        if kind == "raw":
            with open(path, "wb") as f:
                f.write(payload)
        else:
            write_members(path, payload)
        print(f"{name}.pt2: {os.path.getsize(path)} bytes")

    if not a.no_check:
        import logging
        import torch
        logging.getLogger("torch").setLevel(logging.CRITICAL)
        logging.getLogger("torch.export").setLevel(logging.CRITICAL)
        print("\nload_pt2 outcome per file:")
        for name in outs:
            path = os.path.join(a.out, f"{name}.pt2")
            try:
                # load_pt2 directly: torch.export.load hides its errors behind a
                # generic "older format" fallback message
                from torch.export.pt2_archive._package import load_pt2
                contents = load_pt2(path)
                if "model" not in contents.exported_programs:
                    raise RuntimeError("load_pt2 found no models/model.json")
                ep = contents.exported_programs["model"]
                try:
                    ep.module()(torch.randn(2, 4))
                    res = "LOADED and RAN (not rejected by torch)"
                except Exception as e:  # noqa: BLE001
                    res = f"loaded, run failed: {type(e).__name__}: {str(e).splitlines()[0][:150]}"
            except Exception as e:  # noqa: BLE001
                msg = str(e).strip().splitlines()
                res = f"{type(e).__name__}: {(msg[0] if msg else '')[:150]}"
            print(f"  {name}: {res}")


if __name__ == "__main__":
    main()
