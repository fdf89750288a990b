//! Builds the flagship Locus library (the Vam design, src/lib/vam.c) from the source tree
//! with the flags CMake gives it, or, with the `system` feature, links the installed
//! liblocus.so that pkg-config finds.
//!
//! The source tree is the repository this crate sits in (../..), or LOCUS_SOURCE_DIR.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=LOCUS_SOURCE_DIR");
    if cfg!(feature = "system") {
        link_installed();
    } else {
        build_from_source();
    }
}

#[cfg(feature = "system")]
fn link_installed() {
    let version = env!("CARGO_PKG_VERSION");
    // Same minor version: 0.x releases may change the interface between minor versions.
    let next_minor = {
        let mut v = version.split('.').map(|p| p.parse::<u32>().unwrap());
        let (major, minor) = (v.next().unwrap(), v.next().unwrap());
        format!("{major}.{}", minor + 1)
    };
    if let Err(e) = pkg_config::Config::new().range_version(version..next_minor.as_str()).probe("locus") {
        panic!("locus-sys (feature `system`): no installed Locus {version} found with pkg-config: {e}\n\
                (install it with `make install`, or set PKG_CONFIG_PATH to PREFIX/lib/pkgconfig)");
    }
}

#[cfg(not(feature = "system"))]
fn link_installed() {}

fn build_from_source() {
    let root = match env::var_os("LOCUS_SOURCE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."),
    };
    let unity = root.join("src/lib/vam.c");
    if !unity.exists() {
        panic!(
            "locus-sys: the Locus sources are not at {} (set LOCUS_SOURCE_DIR to the repository, \
             or use the `system` feature to link an installed Locus)",
            root.display()
        );
    }
    println!("cargo:rerun-if-changed={}", root.join("src").display());
    println!("cargo:rerun-if-changed={}", root.join("include").display());
    // The flags of CMakeLists.txt's release libraries: one translation unit, internals hidden,
    // initial-exec TLS, and no built-in malloc folding inside the allocator itself.
    cc::Build::new()
        .file(&unity)
        .include(root.join("include"))
        .std("gnu11")
        .opt_level(2)
        .pic(true)
        .define("LOCUS_VARIANT", "\"vam\"")
        .flag("-fvisibility=hidden")
        .flag("-fno-plt")
        .flag("-ftls-model=initial-exec")
        .flag("-fno-builtin-malloc")
        .flag("-fno-builtin-free")
        .compile("locus");
    println!("cargo:include={}", root.join("include").display());
}
