//! `edgehive token`: print a join token for edge nodes.
//!
//! The token is KubeEdge's: `{sha256 of the CA certificate}.{HS256 JWT}`,
//! signed with the CA key under the cloud's data directory and valid 24 h.
//! Tokens are checked statelessly, so any token printed here works until it
//! expires; the running cloud also keeps a fresh one in the Secret
//! `kubeedge/tokensecret` (key `tokendata`), where KubeEdge's tools look.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The cloud's data directory (as given to `edgehive cloud`).
    #[arg(long, env = "EDGEHIVE_DATA_DIR", default_value_os_t = crate::cloud::default_data_dir())]
    data_dir: PathBuf,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let tls = args.data_dir.join("tls");
    if !tls.join(edgehive_pki::CA_CERT_FILE).exists() {
        anyhow::bail!(
            "no CA under {}; start `edgehive cloud --data-dir {}` once first",
            tls.display(),
            args.data_dir.display()
        );
    }
    let ca = edgehive_pki::Ca::load_or_create(&tls, "edgehive-ca").context("load the cloud's CA")?;
    let token = edgehive_pki::issue_token(&ca, time::OffsetDateTime::now_utc(), edgehive_pki::TOKEN_VALIDITY);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{token}").context("write the token")?;
    Ok(ExitCode::SUCCESS)
}
