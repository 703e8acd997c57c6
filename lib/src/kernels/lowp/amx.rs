//! The AMX-BF16 kernel: blocks of [`MR`] x [`NR`] of C in four tiles
//! (`tmm0`-`tmm3`, 16 x 16 float32 each), each step along `k` two tiles
//! of A (`tmm4`, `tmm5`: 16 rows x 32 bfloat16, read where A's rows lie)
//! and two of B (`tmm6`, `tmm7`: 16 pair rows x 16 columns, the panel's
//! halves) and four `tdpbf16ps`. Rust has no stable AMX intrinsics, so
//! the instructions are written as `asm!`; no other code of the process
//! touches the tile registers.
//!
//! Linux hands the tile state to a process only on request
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`), made once in
//! [`available`]; where it is refused the AVX512-BF16 kernel runs.

use super::NR;

/// Rows of C a block computes (two tiles).
pub(super) const MR: usize = 32;

/// Whether the CPU has AMX-BF16 and the kernel let this process use its
/// tiles (asked once).
pub(super) fn available() -> bool {
    static GRANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *GRANTED.get_or_init(|| {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            // CPUID.(EAX=7, ECX=0):EDX bit 22 AMX-BF16, bit 24 AMX-TILE
            let id = std::arch::x86_64::__cpuid_count(7, 0);
            if id.edx & (1 << 22) == 0 || id.edx & (1 << 24) == 0 {
                return false;
            }
            const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
            const XFEATURE_XTILEDATA: libc::c_long = 18;
            // SAFETY: arch_prctl with this request only changes which
            // register state the kernel lets the process enable.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_arch_prctl,
                    ARCH_REQ_XCOMP_PERM,
                    XFEATURE_XTILEDATA,
                )
            };
            r == 0
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        false
    })
}

/// The tile configuration (palette 1): tiles 0-7 of 16 rows x 64 bytes.
#[repr(C, align(64))]
struct Config([u8; 64]);

fn config() -> Config {
    let mut c = [0u8; 64];
    c[0] = 1; // palette
    for t in 0..8 {
        c[16 + 2 * t..18 + 2 * t].copy_from_slice(&64u16.to_le_bytes());
        c[48 + t] = 16;
    }
    Config(c)
}

/// Loads the tile configuration ([`config`]) on this thread, for
/// [`tile`]s until [`release`].
///
/// # Safety
/// The CPU has the kernel and the process its tiles ([`available`]).
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn configure() {
    let cfg = config();
    std::arch::asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly));
}

/// Releases the tiles [`configure`] set up.
///
/// # Safety
/// As [`configure`].
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn release() {
    std::arch::asm!("tilerelease", options(nostack, nomem));
}

/// One block of a product ([`super::gemm`], [`super::conv`]): 32 rows of
/// A (two A tiles of 1 KiB each step) by 32 columns (two B tiles of 16
/// pair rows, `ops.ldb` bytes apart) over every step, into `tile` (32 x
/// [`NR`]), or with `accumulate` added to what `tile` holds.
///
/// # Safety
/// The tiles are configured ([`configure`]); every step's rows lie
/// inside the operands; `tile` holds 32 x [`NR`] floats.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn tile(ops: &super::Operands, tile: *mut f32, accumulate: bool) {
    use std::arch::asm;
    let (t, ld) = (tile.cast::<u8>(), NR * 4);
    if accumulate {
        asm!(
            "tileloadd tmm0, [{t0} + {ld} * 1]",
            "tileloadd tmm1, [{t1} + {ld} * 1]",
            "tileloadd tmm2, [{t2} + {ld} * 1]",
            "tileloadd tmm3, [{t3} + {ld} * 1]",
            t0 = in(reg) t,
            t1 = in(reg) t.add(64),
            t2 = in(reg) t.add(16 * ld),
            t3 = in(reg) t.add(16 * ld + 64),
            ld = in(reg) ld,
            options(nostack, readonly)
        );
    } else {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nostack, nomem)
        );
    }
    // (32 rows from a row block's first: two tiles of 1 KiB, rows 64
    // bytes apart)
    let a1 = ops.a.add(ops.block);
    for s in ops.steps {
        let pb = ops.b.add(s.b);
        asm!(
            "tileloadd tmm4, [{a0} + {lda} * 1]",
            "tileloadd tmm5, [{a1} + {lda} * 1]",
            "tileloadd tmm6, [{b0} + {ldb} * 1]",
            "tileloadd tmm7, [{b1} + {ldb} * 1]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            "tdpbf16ps tmm1, tmm4, tmm7",
            "tdpbf16ps tmm2, tmm5, tmm6",
            "tdpbf16ps tmm3, tmm5, tmm7",
            a0 = in(reg) ops.a.add(s.a),
            a1 = in(reg) a1.add(s.a),
            b0 = in(reg) pb,
            b1 = in(reg) pb.add(64),
            lda = in(reg) 64usize,
            ldb = in(reg) ops.ldb,
            options(nostack, readonly)
        );
    }
    asm!(
        "tilestored [{t0} + {ld} * 1], tmm0",
        "tilestored [{t1} + {ld} * 1], tmm1",
        "tilestored [{t2} + {ld} * 1], tmm2",
        "tilestored [{t3} + {ld} * 1], tmm3",
        t0 = in(reg) t,
        t1 = in(reg) t.add(64),
        t2 = in(reg) t.add(16 * ld),
        t3 = in(reg) t.add(16 * ld + 64),
        ld = in(reg) ld,
        options(nostack)
    );
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn configure() {
    unreachable!("lowp: no AMX off x86_64")
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn release() {}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn tile(_: &super::Operands, _: *mut f32, _: bool) {
    unreachable!("lowp: no AMX off x86_64")
}
