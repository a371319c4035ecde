//! `ControlPlane`: a real etcd and a real kube-apiserver v1.20.2 on 127.0.0.1 (random free
//! ports), for scenarios that need the API server itself: RBAC, kubectl, and the API server
//! calling webhooks. The binaries are provisioned on first use ([`provision::control_plane`]:
//! `tests/control-plane/build.sh` builds kube-apiserver from Debian's `kubernetes` source
//! package and installs etcd from Debian).
//!
//! Starting one takes about 4 s and ~370 MiB of memory: a test that needs several clusters
//! is rare, so start one per test and share it between that test's steps. At most
//! `$ADMISSION_GATEWAY_CONTROL_PLANES` (default 2) run at once in the test process: `start`
//! waits for a slot, held until the `ControlPlane` is dropped. A test holds one at a time.
//!
//! The processes die with the `ControlPlane` (Drop) and with the test binary: each runs under a
//! small `sh` watchdog that holds a pipe from this process and terminates the server when the
//! pipe closes, which the kernel does when the test binary exits, however it exits.

use std::fs::File;
use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use admission_gateway::certs::Ca;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use tempfile::TempDir;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::provision::{self, ControlPlaneTools};

pub use super::provision::KUBERNETES_VERSION;

/// How many control planes may run at once when `$ADMISSION_GATEWAY_CONTROL_PLANES` is unset.
const CONTROL_PLANES_AT_ONCE: usize = 2;

/// How long the API server may take to answer `/readyz` with 200.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The gateway's own identity, as its ServiceAccount authenticates.
pub const GATEWAY_USER: &str = "system:serviceaccount:admission-gateway:admission-gateway";

/// Who a kubeconfig or token authenticates as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// `admin`, group `system:masters`: may do anything.
    Admin,
    /// [`GATEWAY_USER`], groups `system:serviceaccounts`, `system:serviceaccounts:admission-gateway`,
    /// `system:authenticated`: may do what RBAC grants it (nothing to begin with).
    Gateway,
    /// `alice`, group `system:authenticated`: an unprivileged user.
    Alice,
}

impl Identity {
    const ALL: [Identity; 3] = [Identity::Admin, Identity::Gateway, Identity::Alice];

    fn name(self) -> &'static str {
        match self {
            Identity::Admin => "admin",
            Identity::Gateway => "gateway",
            Identity::Alice => "alice",
        }
    }

    /// `(user, uid, groups)` as the token file lists them.
    fn user(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Identity::Admin => ("admin", "admin", "system:masters"),
            Identity::Gateway => (
                GATEWAY_USER,
                "admission-gateway",
                "system:serviceaccounts,system:serviceaccounts:admission-gateway,system:authenticated",
            ),
            Identity::Alice => ("alice", "alice", "system:authenticated"),
        }
    }
}

/// A running etcd + kube-apiserver. Both are stopped and the temporary directory removed when
/// it is dropped.
pub struct ControlPlane {
    // Stopped in this order by Drop, before `dir` is removed.
    apiserver: Supervised,
    /// How the API server was started, to start it again (`stop_apiserver`/`start_apiserver`).
    apiserver_command: (PathBuf, Vec<String>),
    etcd: Supervised,
    server_url: String,
    ca: Ca,
    tokens: [String; 3],
    dir: TempDir,
    /// This control plane's slot among those that may run at once (`slots`).
    _slot: Option<OwnedSemaphorePermit>,
}

/// A binary of the control plane (`kube-apiserver`, `agnhost`), provisioned on first use.
pub fn kube_binary(name: &str) -> PathBuf {
    let tools = provision::control_plane();
    match name {
        "kube-apiserver" => tools.kube_apiserver.clone(),
        "agnhost" => tools.agnhost.clone(),
        other => panic!("no control-plane binary {other}"),
    }
}

/// The control planes that may run at once in this test process: `$ADMISSION_GATEWAY_CONTROL_PLANES`,
/// else [`CONTROL_PLANES_AT_ONCE`]. Each pair of etcd and kube-apiserver takes ~370 MiB and a
/// good part of a core while it starts.
fn slots() -> Arc<Semaphore> {
    static SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    SLOTS
        .get_or_init(|| {
            let count = match std::env::var("ADMISSION_GATEWAY_CONTROL_PLANES") {
                Ok(value) => value.trim().parse().ok().filter(|&n: &usize| n > 0).unwrap_or_else(|| {
                    panic!("ADMISSION_GATEWAY_CONTROL_PLANES={value:?}: expected a positive integer")
                }),
                Err(_) => CONTROL_PLANES_AT_ONCE,
            };
            Arc::new(Semaphore::new(count))
        })
        .clone()
}

/// Why one start attempt failed.
enum StartError {
    /// A process exited while starting (typically a port taken since we picked it): retried once.
    Exited(String),
    /// Anything else.
    Failed(String),
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver and waits until the API server is ready. Panics with the
    /// tail of the failing process's log if it cannot. Provisions them first if they are
    /// missing, and waits for a free slot (`$ADMISSION_GATEWAY_CONTROL_PLANES`).
    pub async fn start() -> ControlPlane {
        let binaries = provision::off_runtime(provision::control_plane).await;
        let slots = slots();
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                eprintln!("control plane: waiting for one of the running control planes to stop");
                slots.acquire_owned().await.expect("the semaphore is never closed")
            }
        };
        let mut plane = match Self::try_start(binaries).await {
            Ok(plane) => plane,
            Err(StartError::Exited(why)) => {
                eprintln!("control plane: retrying once: {why}");
                match Self::try_start(binaries).await {
                    Ok(plane) => plane,
                    Err(StartError::Exited(why) | StartError::Failed(why)) => panic!("{why}"),
                }
            }
            Err(StartError::Failed(why)) => panic!("{why}"),
        };
        plane._slot = Some(slot);
        plane
    }

    async fn try_start(binaries: &ControlPlaneTools) -> Result<ControlPlane, StartError> {
        let dir = tempfile::Builder::new()
            .prefix("admission-gateway-control-plane-")
            .tempdir()
            .map_err(|e| StartError::Failed(format!("temporary directory: {e}")))?;
        let files = Files::write(dir.path(), &binaries.openssl);
        let [client_port, peer_port, secure_port] = free_ports();

        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Supervised::spawn(
            "etcd",
            &binaries.etcd,
            &[
                "--name=control-plane".into(),
                format!("--data-dir={}", dir.path().join("etcd").display()),
                format!("--listen-client-urls={client_url}"),
                format!("--advertise-client-urls={client_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=control-plane={peer_url}"),
                "--logger=zap".into(),
                "--log-level=warn".into(),
            ],
            &dir.path().join("etcd.log"),
        )?;
        let etcd_health = format!("{client_url}/health");
        wait_until(&mut etcd, READY_WITHIN, || http_ok(&etcd_health)).await?;

        let path = |name: &str| dir.path().join(name).display().to_string();
        let apiserver_args: Vec<String> = vec![
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={secure_port}"),
            "--insecure-port=0".into(),
            format!("--etcd-servers={client_url}"),
            format!("--cert-dir={}", path("certs")),
            format!("--tls-cert-file={}", path("apiserver.crt")),
            format!("--tls-private-key-file={}", path("apiserver.key")),
            format!("--client-ca-file={}", path("ca.crt")),
            format!("--token-auth-file={}", path("tokens.csv")),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-key-file={}", path("service-account.key")),
            format!("--service-account-signing-key-file={}", path("service-account.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            "--service-cluster-ip-range=10.96.0.0/24".into(),
            // No controller-manager creates the `default` ServiceAccount it would require.
            "--disable-admission-plugins=ServiceAccount".into(),
            // No Service endpoints for the loopback address to reconcile.
            "--endpoint-reconciler-type=none".into(),
            "--allow-privileged=true".into(),
        ];
        let mut apiserver = Supervised::spawn(
            "kube-apiserver",
            &binaries.kube_apiserver,
            &apiserver_args,
            &dir.path().join("kube-apiserver.log"),
        )?;
        let server_url = format!("https://127.0.0.1:{secure_port}");
        wait_ready(&mut apiserver, &server_url, &files.ca, &files.tokens[0]).await?;

        let plane = ControlPlane {
            apiserver,
            apiserver_command: (binaries.kube_apiserver.clone(), apiserver_args),
            etcd,
            server_url,
            ca: files.ca,
            tokens: files.tokens,
            dir,
            _slot: None,
        };
        for identity in Identity::ALL {
            std::fs::write(plane.kubeconfig(identity), plane.kubeconfig_yaml(identity))
                .expect("kubeconfig written");
        }
        Ok(plane)
    }

    /// Stops the API server (etcd keeps the data): watches on it fail, requests are refused.
    pub fn stop_apiserver(&mut self) {
        self.apiserver.stop();
    }

    /// Starts the API server again, on the same port with the same data, and waits until ready.
    pub async fn start_apiserver(&mut self) {
        let (program, args) = &self.apiserver_command;
        let log = self.dir.path().join("kube-apiserver.restarted.log");
        self.apiserver = match Supervised::spawn("kube-apiserver", program, args, &log) {
            Ok(process) => process,
            Err(StartError::Exited(why) | StartError::Failed(why)) => panic!("{why}"),
        };
        let admin = self.tokens[0].clone();
        if let Err(StartError::Exited(why) | StartError::Failed(why)) =
            wait_ready(&mut self.apiserver, &self.server_url, &self.ca, &admin).await
        {
            panic!("{why}");
        }
    }
}

/// Waits until the API server at `server_url` answers `/readyz` with 200.
async fn wait_ready(
    apiserver: &mut Supervised,
    server_url: &str,
    ca: &Ca,
    admin: &str,
) -> Result<(), StartError> {
    {
        let readyz = format!("{server_url}/readyz");
        let admin = admin.to_owned();
        let client = super::https_client(ca);
        wait_until(apiserver, READY_WITHIN, || {
            let request = http::Request::get(&readyz)
                .header(http::header::AUTHORIZATION, format!("Bearer {admin}"))
                .body(Full::new(Bytes::new()))
                .expect("readyz request");
            let response = client.request(request);
            async move {
                match response.await {
                    Ok(response) => response.status() == http::StatusCode::OK,
                    Err(_) => false,
                }
            }
        })
        .await
    }
}

impl ControlPlane {
    /// `https://127.0.0.1:PORT`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The CA that signed the API server's serving certificate (PEM); also its client CA.
    #[allow(dead_code)] // for scenarios that configure their own clients (e.g. the gateway's)
    pub fn ca_pem(&self) -> &str {
        &self.ca.cert_pem
    }

    /// `GET server_url()PATH` with `identity`'s token: the status and the body.
    pub async fn get(&self, identity: Identity, path: &str) -> (http::StatusCode, String) {
        let request = http::Request::get(format!("{}{path}", self.server_url()))
            .header(http::header::AUTHORIZATION, format!("Bearer {}", self.token(identity)))
            .body(Full::new(Bytes::new()))
            .expect("request");
        let response = super::https_client(&self.ca).request(request).await.expect("the API server answers");
        let status = response.status();
        let body = response.into_body().collect().await.expect("response body").to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// The bearer token of `identity`.
    pub fn token(&self, identity: Identity) -> &str {
        &self.tokens[identity as usize]
    }

    /// A kubeconfig file authenticating as `identity` (written when the control plane started).
    pub fn kubeconfig(&self, identity: Identity) -> PathBuf {
        self.dir.path().join(format!("kubeconfig-{}.yaml", identity.name()))
    }

    /// The real `kubectl --kubeconfig <identity> ARGS…`, run off the runtime's threads (mock
    /// webhooks in the same runtime keep serving the API server's calls).
    pub async fn kubectl<S: AsRef<str>>(&self, identity: Identity, args: &[S]) -> Output {
        self.kubectl_with_stdin(identity, args, None).await
    }

    /// `kubectl apply -f -` as `identity` with `yaml` on its standard input.
    pub async fn kubectl_apply_stdin(&self, identity: Identity, yaml: &str) -> Output {
        self.kubectl_with_stdin(identity, &["apply", "-f", "-"], Some(yaml.to_owned())).await
    }

    /// `kubectl ARGS…` that must succeed: its standard output, or a panic with its standard error.
    pub async fn kubectl_ok<S: AsRef<str>>(&self, identity: Identity, args: &[S]) -> String {
        let output = self.kubectl(identity, args).await;
        succeeded(&output, args);
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `kubectl apply -f -` that must succeed.
    pub async fn apply_ok(&self, identity: Identity, yaml: &str) -> String {
        let output = self.kubectl_apply_stdin(identity, yaml).await;
        succeeded(&output, &["apply", "-f", "-"]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `kubectl ARGS…` as `identity` with `stdin` on its standard input.
    pub async fn kubectl_with_stdin<S: AsRef<str>>(
        &self,
        identity: Identity,
        args: &[S],
        stdin: Option<String>,
    ) -> Output {
        let mut command = Command::new(&provision::control_plane().kubectl);
        command
            .arg("--kubeconfig")
            .arg(self.kubeconfig(identity))
            .arg("--cache-dir")
            .arg(self.dir.path().join("kubectl-cache"))
            .args(args.iter().map(AsRef::as_ref))
            .env_remove("KUBECONFIG")
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        tokio::task::spawn_blocking(move || {
            let mut child = command.spawn().expect("kubectl runs");
            if let Some(text) = stdin {
                let mut pipe = child.stdin.take().expect("stdin is piped");
                pipe.write_all(text.as_bytes()).expect("kubectl reads its standard input");
            }
            child.wait_with_output().expect("kubectl finishes")
        })
        .await
        .expect("kubectl task")
    }

    fn kubeconfig_yaml(&self, identity: Identity) -> String {
        let name = identity.name();
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: control-plane\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
             users:\n- name: {name}\n  user:\n    token: {token}\n\
             contexts:\n- name: {name}\n  context:\n    cluster: control-plane\n    user: {name}\n\
             current-context: {name}\n",
            server = self.server_url,
            ca = self.dir.path().join("ca.crt").display(),
            token = self.token(identity),
        )
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.apiserver.stop();
        self.etcd.stop();
    }
}

/// Panics with kubectl's standard error unless it exited 0.
fn succeeded<S: AsRef<str>>(output: &Output, args: &[S]) {
    if !output.status.success() {
        let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        panic!(
            "kubectl {} failed ({}):\n{}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The files the API server reads, written into the temporary directory.
struct Files {
    ca: Ca,
    /// Bearer tokens, indexed by `Identity as usize`.
    tokens: [String; 3],
}

impl Files {
    fn write(dir: &Path, openssl: &Path) -> Self {
        let ca = Ca::new("admission-gateway test control plane").expect("control plane CA");
        let serving = ca.issue(&["127.0.0.1", "localhost"]).expect("API server certificate");
        std::fs::write(dir.join("ca.crt"), &ca.cert_pem).expect("ca.crt");
        std::fs::write(dir.join("apiserver.crt"), &serving.cert_pem).expect("apiserver.crt");
        std::fs::write(dir.join("apiserver.key"), &serving.key_pem).expect("apiserver.key");

        // The service-account keys must be RSA or SEC1 EC (k8s.io/client-go/util/keyutil reads
        // no PKCS#8 EC key, which is what rcgen writes).
        let key = dir.join("service-account.key");
        let openssl = Command::new(openssl)
            .args(["genrsa", "-out"])
            .arg(&key)
            .arg("2048")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("openssl runs");
        assert!(openssl.status.success(), "openssl genrsa: {}", String::from_utf8_lossy(&openssl.stderr));

        let tokens = Identity::ALL.map(|_| uuid::Uuid::new_v4().simple().to_string());
        let mut csv = String::new();
        for (identity, token) in Identity::ALL.iter().zip(&tokens) {
            let (user, uid, groups) = identity.user();
            csv.push_str(&format!("{token},{user},{uid},\"{groups}\"\n"));
        }
        std::fs::write(dir.join("tokens.csv"), csv).expect("tokens.csv");
        Files { ca, tokens }
    }
}

/// Three distinct free loopback ports: bound together, so they differ, then released for the
/// servers to take (another process may take one first: `start` then retries once).
fn free_ports() -> [u16; 3] {
    let listeners = [(); 3].map(|_| TcpListener::bind("127.0.0.1:0").expect("a free loopback port"));
    listeners.map(|listener| listener.local_addr().expect("local address").port())
}

/// A helper server started by a scenario (e.g. agnhost's webhook) under the same watchdog as etcd
/// and the API server: stopped when dropped, and when the test binary exits however it exits.
pub struct Helper(Supervised);

impl Helper {
    /// Starts `program ARGS…` with its output in `log`; panics if it cannot be started.
    pub fn spawn(name: &'static str, program: &Path, args: &[String], log: &Path) -> Helper {
        match Supervised::spawn(name, program, args, log) {
            Ok(process) => Helper(process),
            Err(StartError::Exited(why) | StartError::Failed(why)) => panic!("{why}"),
        }
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> bool {
        self.0.exited().is_some()
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        self.0.log_tail()
    }
}

/// One server process under its watchdog. `sh` keeps the read end of a pipe from this process
/// on a background watcher, then `exec`s the server (same pid). When the pipe closes — `stop`,
/// or this process gone for any reason — the watcher sends SIGTERM, then SIGKILL after 5 s.
struct Supervised {
    name: &'static str,
    child: Child,
    lifeline: Option<ChildStdin>,
    log: PathBuf,
}

const WATCHDOG: &str = r#"
exec 3<&0
server=$$
(
    read -r _ <&3
    kill -TERM "$server" 2>/dev/null
    i=0
    while kill -0 "$server" 2>/dev/null && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$server" 2>/dev/null
) &
exec "$@" </dev/null 3<&-
"#;

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Supervised {
    fn spawn(name: &'static str, program: &Path, args: &[String], log: &Path) -> Result<Self, StartError> {
        let file = File::create(log).map_err(|e| StartError::Failed(format!("{}: {e}", log.display())))?;
        let stderr = file.try_clone().expect("log file handle");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg(name)
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(file)
            .stderr(stderr)
            .spawn()
            .map_err(|e| StartError::Failed(format!("{name} ({}) does not start: {e}", program.display())))?;
        let lifeline = child.stdin.take();
        Ok(Supervised { name, child, lifeline, log: log.to_owned() })
    }

    /// Whether the process has exited (and how).
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last lines of its log.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Closes the lifeline (the watcher sends SIGTERM) and waits up to 10 s, then kills.
    fn stop(&mut self) {
        drop(self.lifeline.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` every 100 ms until it holds; fails if `process` exits first or `within` passes.
async fn wait_until<F, Fut>(
    process: &mut Supervised,
    within: Duration,
    mut check: F,
) -> Result<(), StartError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = process.exited() {
            return Err(StartError::Exited(format!(
                "{} exited ({status}) while starting; the end of its log:\n{}",
                process.name,
                process.log_tail()
            )));
        }
        if check().await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(StartError::Failed(format!(
                "{} not ready within {} s; the end of its log:\n{}",
                process.name,
                within.as_secs(),
                process.log_tail()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `GET url` (plain HTTP) answers 200.
async fn http_ok(url: &str) -> bool {
    let client = super::http_client();
    let Ok(uri) = url.parse::<http::Uri>() else { return false };
    match client.get(uri).await {
        Ok(response) => {
            let ok = response.status() == http::StatusCode::OK;
            let _ = response.into_body().collect().await;
            ok
        }
        Err(_) => false,
    }
}
