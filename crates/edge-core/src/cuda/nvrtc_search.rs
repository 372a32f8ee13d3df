//! Where NVRTC is looked for: the typed search configuration and the file search.
//!
//! cudarc opens NVRTC by a fixed list of names derived from the CUDA version its
//! bindings were generated for (with `cuda-12080`: `libnvrtc.so`, `libnvrtc.so.12`, …),
//! through the loader's search path only. A CUDA 13 install ships just
//! `libnvrtc.so.13`, often outside that path, and a pip wheel puts it in
//! `nvidia/cu13/lib`. So edge-llm finds the file itself and opens it by path.

use crate::{CoreError, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where to look for NVRTC.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum NvrtcLocation {
    /// The conventional places, in order: `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`
    /// (each as a CUDA install root), then the dynamic loader's own search
    /// (`LD_LIBRARY_PATH`, the system library cache) by file name.
    #[default]
    Conventional,
    /// Only this folder: a CUDA install root (`lib64/` or `lib/` inside), a pip wheel's
    /// `nvidia/cu13` folder, or the folder holding `libnvrtc` itself.
    Dir(PathBuf),
}

/// One place NVRTC may be opened from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcCandidate {
    /// An existing file, or (for the loader's own search) a bare file name.
    pub library: PathBuf,
    /// The CUDA headers beside it (`include/` of the same install), when there are any;
    /// passed to NVRTC as `-I`.
    pub include_dir: Option<PathBuf>,
}

/// Library file names, newest NVRTC first: the compile check wants the newest
/// architectures, and a CUDA 13 install has no `.so.12` or unversioned name.
#[cfg(not(windows))]
const LIBRARY_NAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];
#[cfg(windows)]
const LIBRARY_NAMES: &[&str] = &["nvrtc64_130_0.dll", "nvrtc64_120_0.dll"];

/// Folders under a root that may hold the library; "" is the root itself.
#[cfg(not(windows))]
const LIBRARY_SUBDIRS: &[&str] = &["lib64", "lib", ""];
#[cfg(windows)]
const LIBRARY_SUBDIRS: &[&str] = &["bin\\x64", "bin", ""];

/// The install roots tried by [`NvrtcLocation::Conventional`].
const DEFAULT_ROOT: &str = "/usr/local/cuda";
const ROOT_VARIABLES: &[&str] = &["CUDA_HOME", "CUDA_PATH"];

impl NvrtcLocation {
    /// The candidates that exist on this machine, best first, followed (for
    /// [`Conventional`](Self::Conventional)) by the bare names for the loader's search.
    ///
    /// Fails with [`CoreError::NvrtcNotFound`] when there is nothing to try.
    pub fn candidates(&self) -> Result<Vec<NvrtcCandidate>> {
        self.candidates_with(|name| std::env::var_os(name))
    }

    /// [`candidates`](Self::candidates) with the environment injected (tests).
    pub(crate) fn candidates_with(
        &self,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Vec<NvrtcCandidate>> {
        let (roots, loader_search) = match self {
            NvrtcLocation::Conventional => {
                let mut roots: Vec<PathBuf> = ROOT_VARIABLES
                    .iter()
                    .filter_map(|v| env(v))
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
                    .collect();
                roots.push(PathBuf::from(DEFAULT_ROOT));
                roots.dedup();
                (roots, true)
            }
            NvrtcLocation::Dir(dir) => (vec![dir.clone()], false),
        };
        let mut found = Vec::new();
        for root in &roots {
            for sub in LIBRARY_SUBDIRS {
                let dir = if sub.is_empty() {
                    root.clone()
                } else {
                    root.join(sub)
                };
                for name in LIBRARY_NAMES {
                    let library = dir.join(name);
                    if library.is_file() {
                        found.push(NvrtcCandidate {
                            include_dir: include_dir_for(root, &dir),
                            library,
                        });
                    }
                }
            }
        }
        if loader_search {
            found.extend(LIBRARY_NAMES.iter().map(|name| NvrtcCandidate {
                library: PathBuf::from(name),
                include_dir: None,
            }));
        }
        if found.is_empty() {
            return Err(CoreError::NvrtcNotFound {
                searched: searched_places(&roots, loader_search),
            });
        }
        Ok(found)
    }
}

/// `include/` of the install: under the root, or beside the library's folder (when the
/// root given was the library folder itself).
fn include_dir_for(root: &Path, lib_dir: &Path) -> Option<PathBuf> {
    [
        Some(root.join("include")),
        lib_dir.parent().map(|p| p.join("include")),
    ]
    .into_iter()
    .flatten()
    .find(|d| d.is_dir())
}

/// Every place looked at, for the not-found error.
pub(crate) fn searched_places(roots: &[PathBuf], loader_search: bool) -> Vec<String> {
    let mut places: Vec<String> = roots
        .iter()
        .flat_map(|root| {
            LIBRARY_SUBDIRS.iter().map(move |sub| {
                let dir = if sub.is_empty() {
                    root.clone()
                } else {
                    root.join(sub)
                };
                format!("{}/{{{}}}", dir.display(), LIBRARY_NAMES.join(","))
            })
        })
        .collect();
    if loader_search {
        places.push(format!(
            "the dynamic loader's search path (LD_LIBRARY_PATH, system cache) for {}",
            LIBRARY_NAMES.join(", ")
        ));
    }
    places
}

#[cfg(all(test, not(windows)))]
mod tests {
    use super::*;

    /// The test's own folder (tests run in parallel), removed when dropped.
    fn temp_dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn finds_a_cuda13_install_with_only_the_so13_name() {
        let tmp = temp_dir();
        let root = tmp.path().to_path_buf();
        std::fs::create_dir_all(root.join("lib64")).unwrap();
        std::fs::create_dir_all(root.join("include")).unwrap();
        std::fs::write(root.join("lib64/libnvrtc.so.13"), b"not really ELF").unwrap();
        let found = NvrtcLocation::Dir(root.clone()).candidates().unwrap();
        assert_eq!(
            found,
            vec![NvrtcCandidate {
                library: root.join("lib64/libnvrtc.so.13"),
                include_dir: Some(root.join("include")),
            }]
        );
    }

    #[test]
    fn finds_the_pip_wheel_layout_and_a_bare_library_folder() {
        let tmp = temp_dir();
        let cu13 = tmp.path().join("nvidia/cu13");
        std::fs::create_dir_all(cu13.join("lib")).unwrap();
        std::fs::create_dir_all(cu13.join("include")).unwrap();
        std::fs::write(cu13.join("lib/libnvrtc.so.13"), b"").unwrap();
        let lib = cu13.join("lib/libnvrtc.so.13");
        let from_root = NvrtcLocation::Dir(cu13.clone()).candidates().unwrap();
        assert_eq!(from_root[0].library, lib);
        assert_eq!(from_root[0].include_dir, Some(cu13.join("include")));
        // Pointing at the library folder itself also finds the headers beside it.
        let from_lib = NvrtcLocation::Dir(cu13.join("lib")).candidates().unwrap();
        assert_eq!(from_lib[0].library, lib);
        assert_eq!(from_lib[0].include_dir, Some(cu13.join("include")));
    }

    #[test]
    fn no_candidate_is_a_typed_error_listing_the_places() {
        let tmp = temp_dir();
        let empty = tmp.path().to_path_buf();
        let err = NvrtcLocation::Dir(empty.clone()).candidates().unwrap_err();
        let CoreError::NvrtcNotFound { searched } = &err else {
            panic!("wrong error: {err}");
        };
        assert_eq!(searched.len(), LIBRARY_SUBDIRS.len());
        assert!(searched[0].contains("lib64") && searched[0].contains("libnvrtc.so.13"));
        assert!(err.to_string().contains(&empty.display().to_string()));
    }

    #[test]
    fn conventional_search_honours_cuda_home_then_falls_back_to_the_loader() {
        let tmp = temp_dir();
        let home = tmp.path().to_path_buf();
        std::fs::create_dir_all(home.join("lib64")).unwrap();
        std::fs::write(home.join("lib64/libnvrtc.so.13"), b"").unwrap();
        let env = |name: &str| (name == "CUDA_HOME").then(|| home.clone().into_os_string());
        let found = NvrtcLocation::Conventional.candidates_with(env).unwrap();
        assert_eq!(found[0].library, home.join("lib64/libnvrtc.so.13"));
        // The loader's names come last, whatever exists on this machine.
        let tail: Vec<_> = found[found.len() - LIBRARY_NAMES.len()..]
            .iter()
            .map(|c| c.library.clone())
            .collect();
        assert_eq!(
            tail,
            LIBRARY_NAMES.iter().map(PathBuf::from).collect::<Vec<_>>()
        );
    }
}
