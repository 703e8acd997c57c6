"""Check: no kernel of this build calls an intrinsic, or a closure of
`std::array::from_fn`, out of line.

    python3 recipes/checks/check_inlined.py [--bin target/release/ir-run]

A closure (or `std::array::from_fn`'s wrapper around one) is a function of
its own: where the compiler leaves it out of line it is compiled without
the `#[target_feature]` of the kernel it came from, and every intrinsic in
it becomes a call. Nothing fails, the numbers are the same, and the kernel
runs at a fraction of its speed (the direct product's loads were such
calls, 2x its time; see lib/src/kernels/simd.rs). This disassembles the
binary (objdump, from binutils) and lists every function of pt2kit that
calls `core::core_arch::...` or `core::array::try_from_fn` / its
`Wrapped` closure. Exit 0: none; 1: some (listed); 2: objdump missing or
the binary unreadable (said so, not passed).
"""
import argparse
import collections
import re
import shutil
import subprocess
import sys

BAD = re.compile(r"core::core_arch::|core::array::try_from_fn|core::ops::try_trait::Wrapped<")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/ir-run")
    args = ap.parse_args()
    if not shutil.which("objdump"):
        print("check_inlined: objdump (binutils) not found: NOT checked", file=sys.stderr)
        return 2
    try:
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", args.bin],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"check_inlined: {args.bin}: cannot disassemble: {e}", file=sys.stderr)
        return 2
    fn, found, fns = None, collections.defaultdict(collections.Counter), 0
    for line in dis.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            fn = m.group(1)
            fns += fn.startswith(("pt2kit::", "<pt2kit::"))
            continue
        m = re.search(r"\bcall\s+[0-9a-f]+ <(.*)>", line)
        if m and fn and fn.startswith(("pt2kit::", "<pt2kit::")) and BAD.search(m.group(1)):
            found[fn][m.group(1)] += 1
    if fns == 0:
        print(f"check_inlined: {args.bin}: no pt2kit functions found (stripped?): NOT checked",
              file=sys.stderr)
        return 2
    if not found:
        print(f"check_inlined: {fns} pt2kit functions in {args.bin}, none calls an intrinsic out of line")
        return 0
    for f, calls in sorted(found.items()):
        print(f"{f}", file=sys.stderr)
        for c, n in calls.most_common():
            print(f"    {n} x call {c}", file=sys.stderr)
    print(f"check_inlined: {len(found)} pt2kit functions call intrinsics or from_fn closures out of line "
          "(make them loops or #[inline(always)] functions: see lib/src/kernels/simd.rs)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
