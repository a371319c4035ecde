//! What the tests run that is not in the repository — etcd, kube-apiserver, agnhost, kubectl,
//! openssl, Prometheus, kopf, the upstream oracle — provisioned by the test command itself on
//! first use, so `cargo test --locked` passes on a fresh machine with nothing installed
//! beforehand.
//!
//! One entry point per tool ([`control_plane`], [`openssl`], [`prometheus`], [`kopf`],
//! [`oracle`]). Each looks for its tool; when it is missing it runs
//! `bash tests/provision/provision.sh TOOL`, which takes an exclusive lock on `$CACHE/locks/TOOL.lock` (`flock`), so concurrent test
//! threads and test processes provision a tool once, installs or builds it, and prints its
//! progress on standard error ("provisioning TOOL (first use, cached afterwards)…"; not
//! captured by the test harness, so it shows in CI logs too). Within one test process the result
//! is memoized ([`OnceLock`]): found once, looked up once.
//!
//! `$CACHE` is `$ADMISSION_GATEWAY_CACHE`, else `$HOME/.cache/admission-gateway`. Debian packages
//! (etcd, kubectl, openssl, prometheus) are installed with apt-get: root or sudo.
//!
//! Nothing is skipped: a tool that cannot be provisioned fails the test that needs it, with a
//! panic naming the tool and the command that failed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The Kubernetes version `tests/control-plane/build.sh` builds.
pub const KUBERNETES_VERSION: &str = "v1.20.2";

/// The kopf version `tests/provision/provision.sh kopf` installs.
const KOPF_VERSION: &str = "1.45.2";

/// The provisioning script, relative to the repository.
const SCRIPT: &str = "tests/provision/provision.sh";

/// `provisioned()` (one of this module's entry points) run off the async runtime's threads: a
/// first provisioning takes minutes. Its panic, if it panics, is the caller's.
pub async fn off_runtime<T: Send + 'static>(provisioned: fn() -> T) -> T {
    match tokio::task::spawn_blocking(provisioned).await {
        Ok(found) => found,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}

/// `$ADMISSION_GATEWAY_CACHE`, else `$HOME/.cache/admission-gateway`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("ADMISSION_GATEWAY_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/admission-gateway")
    })
}

/// Where kube-apiserver and agnhost are: `$ADMISSION_GATEWAY_KUBE_BIN_DIR` (binaries of one's
/// own, never provisioned), else `$CACHE/kubernetes-v1.20.2/bin`, where `build.sh` puts them.
pub fn kube_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ADMISSION_GATEWAY_KUBE_BIN_DIR") {
        return dir.into();
    }
    cache_dir().join(format!("kubernetes-{KUBERNETES_VERSION}")).join("bin")
}

/// The programs a control plane runs (`support::control_plane`), all present.
#[derive(Debug)]
pub struct ControlPlaneTools {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub agnhost: PathBuf,
    pub kubectl: PathBuf,
    pub openssl: PathBuf,
}

/// etcd, kube-apiserver, agnhost, kubectl and openssl; provisioned by
/// `tests/control-plane/build.sh` when any is missing (a first build takes 4-6 minutes).
pub fn control_plane() -> &'static ControlPlaneTools {
    static TOOLS: OnceLock<Result<ControlPlaneTools, String>> = OnceLock::new();
    provisioned(&TOOLS, "control-plane", || {
        let bin = kube_bin_dir();
        let built = |name: &str| {
            let path = bin.join(name);
            if path.is_file() {
                Ok(path)
            } else if std::env::var_os("ADMISSION_GATEWAY_KUBE_BIN_DIR").is_some() {
                // Not ours to build: say so instead of building into the cache.
                Err(Missing::Fatal(format!(
                    "{name} not found at {} ($ADMISSION_GATEWAY_KUBE_BIN_DIR is set: unset it to have the \
                     tests build kube-apiserver and agnhost into {})",
                    path.display(),
                    cache_dir().display()
                )))
            } else {
                Err(Missing::Provisionable(format!("{name} not found at {}", path.display())))
            }
        };
        Ok(ControlPlaneTools {
            kube_apiserver: built("kube-apiserver")?,
            agnhost: built("agnhost")?,
            etcd: installed("etcd")?,
            kubectl: installed("kubectl")?,
            openssl: installed("openssl")?,
        })
    })
}

/// The real `openssl`; Debian's package when it is missing.
pub fn openssl() -> &'static Path {
    static OPENSSL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    provisioned(&OPENSSL, "openssl", || installed("openssl")).as_path()
}

/// The real `prometheus`; Debian's package when it is missing.
pub fn prometheus() -> &'static Path {
    static PROMETHEUS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    provisioned(&PROMETHEUS, "prometheus", || installed("prometheus")).as_path()
}

/// A Python interpreter that imports kopf 1.45.2: the one of the virtualenv
/// `$CACHE/kopf-1.45.2`, made with kopf from PyPI when it is missing.
pub fn kopf() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    provisioned(&PYTHON, "kopf", || {
        let venv = cache_dir().join(format!("kopf-{KOPF_VERSION}"));
        let python = venv.join("bin/python");
        // The script writes `.provisioned` once `pip install` has succeeded.
        if venv.join(".provisioned").is_file() && python.is_file() {
            Ok(python)
        } else {
            Err(Missing::Provisionable(format!("kopf {KOPF_VERSION} not found in {}", venv.display())))
        }
    })
    .as_path()
}

/// The upstream oracle (`tests/oracle/main.go`: k8s.io/apiserver's admission code, built by
/// `tests/oracle/provision.sh`): `bash tests/provision/provision.sh oracle` is run once per test
/// process whatever is cached, since it rebuilds the binary when `tests/oracle/main.go` changed
/// (seconds when nothing did; a first provisioning downloads 285 MB and builds for ~5 minutes).
/// The binary is the one `$CACHE/oracle-current` names.
pub fn oracle() -> &'static Path {
    static ORACLE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = ORACLE.get_or_init(|| {
        provision("oracle")?;
        let current = cache_dir().join("oracle-current");
        let path = std::fs::read_to_string(&current).map_err(|e| {
            format!("{} unreadable after `{}`: {e}", current.display(), command_line("oracle"))
        })?;
        let path = PathBuf::from(path.trim());
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{} names {}, which is missing", current.display(), path.display()))
        }
    });
    match found {
        Ok(path) => path.as_path(),
        Err(why) => panic!("oracle is missing and could not be provisioned: {why}"),
    }
}

/// Why a tool was not found.
enum Missing {
    /// Provisioning may bring it.
    Provisionable(String),
    /// Provisioning would not help.
    Fatal(String),
}

/// A program on PATH or in /usr/bin (where Debian's packages put it; PATH may not have /usr/sbin
/// and the like, but these are all in /usr/bin).
fn installed(name: &str) -> Result<PathBuf, Missing> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join(name)).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([Path::new("/usr/bin").join(name)])
        .find(|path| path.is_file())
        .ok_or_else(|| Missing::Provisionable(format!("{name} not found on PATH nor in /usr/bin")))
}

/// `find()`, provisioning `tool` first when it finds nothing; memoized in `cell`. Panics naming
/// the tool, and the command that failed, when it cannot be provisioned.
fn provisioned<T>(
    cell: &'static OnceLock<Result<T, String>>,
    tool: &str,
    find: impl Fn() -> Result<T, Missing>,
) -> &'static T {
    let found = cell.get_or_init(|| match find() {
        Ok(found) => Ok(found),
        Err(Missing::Fatal(why)) => Err(why),
        Err(Missing::Provisionable(_)) => {
            provision(tool)?;
            find().map_err(|(Missing::Provisionable(why) | Missing::Fatal(why))| {
                format!("{tool}: {why}, although `{}` succeeded", command_line(tool))
            })
        }
    });
    match found {
        Ok(found) => found,
        Err(why) => panic!("{tool} is missing and could not be provisioned: {why}"),
    }
}

/// `bash tests/provision/provision.sh TOOL`, its output on this process's standard error.
fn provision(tool: &str) -> Result<(), String> {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("bash")
        .arg(repository.join(SCRIPT))
        .arg(tool)
        .current_dir(repository)
        .stdin(Stdio::null())
        // The script sends everything to standard error; inherited, not captured by libtest.
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| format!("`{}` did not start: {e}", command_line(tool)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({status}); its output is above, on standard error", command_line(tool)))
    }
}

fn command_line(tool: &str) -> String {
    format!("bash {SCRIPT} {tool}")
}
