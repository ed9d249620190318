//! Link options of the `pulsar-connect` binary that keep its resident memory small (BENCHMARKS.md,
//! "Memory"); the library, the tests and the examples link as before.
//!
//! - `--symbol-ordering-file=link/symbol-order.txt`: the ~11 000 functions a job runs (start-up, a json
//!   read; made by `xtask/bench/symbol-order.sh`) are laid out next to each other. The kernel maps each
//!   page fault on the binary with its neighbours (fault-around, 64-128 KB), so those functions spread over
//!   ~100 MB of `.text` made ~48-60 MB of it resident; side by side they make 4-10 MB. A name the file lists
//!   that the binary no longer has is skipped (`--no-warn-symbol-ordering`): a stale file costs memory,
//!   never correctness (with 14 % of the names stale, `.text` was 12-18 MB resident instead of 4-10 MB).
//!   Generic code instantiated in this crate carries its metadata hash in its name: regenerate the file
//!   from a binary built with this script, after dependency, toolchain or profile changes, from the build
//!   users make (`cargo build --release -p pulsar-connect --bin pulsar-connect`: a build with the
//!   package's dev-dependencies renames ~22 % of the functions). `cargo xtask bench` prints how much of
//!   the file the binary still has (in 2026-12 a file down to 34 % doubled a json read's peak RSS).
//! - `-z pack-relative-relocs` (DT_RELR, glibc >= 2.36): the 377 000 relative relocations of the
//!   position-independent binary take 80 KB instead of a 9 MB `.rela.dyn` that the dynamic loader reads
//!   at every start.
//!
//! Both are lld options (the default linker of the x86_64-unknown-linux-gnu Rust toolchain since 1.90);
//! other targets link without them.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=link/symbol-order.txt");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("CARGO_CFG_TARGET_ARCH") != "x86_64"
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
    {
        return;
    }
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    let order = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join("link/symbol-order.txt");
    println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    // The ordering file is an lld option: a build whose user picked another linker (GNU ld has no
    // `--symbol-ordering-file`) links without it rather than failing.
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let own_linker = !var("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_empty()
        || flags.contains("linker")
        || flags.contains("fuse-ld");
    // The linker reads a copy in OUT_DIR: a build directory shared by two checkouts (CI's and a
    // developer's share `CARGO_BUILD_BUILD_DIR`) may reuse this script's output from the other checkout,
    // and an absolute path into that checkout breaks the link once it is gone.
    let copy = std::path::Path::new(&var("OUT_DIR")).join("symbol-order.txt");
    if !own_linker && order.is_file() && std::fs::copy(&order, &copy).is_ok() {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            copy.display()
        );
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
