//! `edgehive token`: join tokens for edge nodes — create (the default),
//! list, revoke.
//!
//! A token is KubeEdge's: `{sha256 of the CA certificate}.{HS256 JWT}`,
//! signed with the CA key under the cloud's data directory. It is accepted
//! only while the running cloud keeps its record (a Kubernetes bootstrap
//! token Secret, `kube-system/bootstrap-token-{id}`), which this command
//! writes through the cloud's API as its admin: so the cloud must be
//! running, and `revoke` (or deleting the Secret with kubectl) ends a token
//! at once. The running cloud also keeps a fresh token in the Secret
//! `kubeedge/tokensecret` (key `tokendata`), where KubeEdge's tools look.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use edgehive_credentials::TokenSpec;
use edgehive_credentials::records::{TOKEN_NAMESPACE, TOKEN_TYPE, TokenRecord, token_secret_name};
use http::{Method, StatusCode};
use serde_json::Value;

use crate::admin::AdminClient;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// `edgehive token` alone creates a token.
    #[command(flatten)]
    create: CreateArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Create a token and print it.
    Create(CreateArgs),
    /// List the tokens the cloud accepts.
    List(DataDir),
    /// Revoke a token: it joins no node from now on (certificates already
    /// issued with it stay valid; `edgehive node revoke` ends those).
    Revoke {
        #[command(flatten)]
        data: DataDir,
        /// The token's id (the ID column of `edgehive token list`), or the
        /// whole token.
        id: String,
    },
}

#[derive(Debug, clap::Args)]
struct DataDir {
    /// The cloud's data directory (as given to `edgehive cloud`).
    #[arg(long, env = "EDGEHIVE_DATA_DIR", default_value_os_t = crate::cloud::default_data_dir())]
    data_dir: PathBuf,
}

#[derive(Debug, clap::Args)]
struct CreateArgs {
    #[command(flatten)]
    data: DataDir,
    /// How long the token is accepted (24h, 30m, 7d).
    #[arg(long, default_value = "24h", value_parser = crate::duration::positive)]
    ttl: Duration,
    /// What the token is for, shown by `edgehive token list`.
    #[arg(long, default_value = "")]
    description: String,
    /// Let the token take over this existing node (one that is registered
    /// and holds a valid certificate), e.g. to re-provision it; the node's
    /// old certificate stops working. Repeat for several nodes.
    #[arg(long = "rejoin", value_name = "NODE")]
    rejoin_nodes: Vec<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("start the runtime")?;
    rt.block_on(async {
        match args.command {
            None => create(args.create).await,
            Some(Command::Create(c)) => create(c).await,
            Some(Command::List(d)) => list(&d.data_dir).await,
            Some(Command::Revoke { data, id }) => revoke(&data.data_dir, &id).await,
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

async fn create(args: CreateArgs) -> anyhow::Result<()> {
    let dir = &args.data.data_dir;
    let tls = dir.join("tls");
    if !tls.join(edgehive_pki::CA_CERT_FILE).exists() {
        bail!("no CA under {}; start `edgehive cloud --data-dir {}` first", tls.display(), dir.display());
    }
    for node in &args.rejoin_nodes {
        if let Some(why) = edgehive_registry::validation::dns1123_subdomain(node).first() {
            bail!("--rejoin {node:?}: {why}");
        }
    }
    let spec = TokenSpec { ttl: args.ttl, description: args.description, rejoin_nodes: args.rejoin_nodes };
    let token = new_token(dir, &spec).await?;
    writeln!(std::io::stdout().lock(), "{token}").context("write the token")
}

/// A new token of the cloud whose data directory is `dir`, recorded
/// through its API.
pub(crate) async fn new_token(dir: &Path, spec: &TokenSpec) -> anyhow::Result<String> {
    let tls = dir.join("tls");
    let ca = edgehive_pki::Ca::load_or_create(&tls, "edgehive-ca").context("load the cloud's CA")?;
    let client = AdminClient::from_data_dir(dir)?;
    let path = format!("/api/v1/namespaces/{TOKEN_NAMESPACE}/secrets");
    for _ in 0..4 {
        let record = TokenRecord::new(spec, time::OffsetDateTime::now_utc());
        let (status, answer) = client.call(Method::POST, &path, Some(&record.to_secret())).await?;
        match status {
            s if s.is_success() => return Ok(record.token(&ca)),
            // An id in use: draw another.
            StatusCode::CONFLICT => continue,
            s => bail!("the cloud refused the token's record ({s}): {}", message(&answer)),
        }
    }
    bail!("no free token id after four tries")
}

fn message(answer: &Value) -> &str {
    answer.get("message").and_then(Value::as_str).unwrap_or_default()
}

/// The records of the tokens the cloud accepts, oldest first.
async fn records(client: &AdminClient) -> anyhow::Result<Vec<TokenRecord>> {
    let list = client.expect(Method::GET, &format!("/api/v1/namespaces/{TOKEN_NAMESPACE}/secrets"), None).await?;
    let mut out = Vec::new();
    for item in list.get("items").and_then(Value::as_array).into_iter().flatten() {
        if item.get("type").and_then(Value::as_str) != Some(TOKEN_TYPE) {
            continue;
        }
        match TokenRecord::from_secret(item) {
            Ok(r) => out.push(r),
            Err(e) => eprintln!("edgehive: skipping a damaged token record: {e}"),
        }
    }
    out.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.id.cmp(&b.id)));
    Ok(out)
}

async fn list(dir: &Path) -> anyhow::Result<()> {
    let client = AdminClient::from_data_dir(dir)?;
    let records = records(&client).await?;
    let now = time::OffsetDateTime::now_utc();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{:<8}{:<10}{:<22}{:<20}DESCRIPTION", "ID", "TTL", "EXPIRES", "REJOIN")?;
    for r in records {
        let left = r.expires - now;
        let ttl = if left.is_negative() { "<expired>".to_owned() } else { short(left) };
        let rejoin = if r.rejoin_nodes.is_empty() { "<none>".to_owned() } else { r.rejoin_nodes.join(",") };
        let expires = edgehive_store::rfc3339(r.expires);
        writeln!(out, "{:<8}{:<10}{:<22}{:<20}{}", r.id, ttl, expires, rejoin, r.description)?;
    }
    Ok(())
}

/// `23h`, `6d`, `59m`: the largest unit, as kubectl's AGE column.
fn short(d: time::Duration) -> String {
    let s = d.whole_seconds();
    match s {
        s if s >= 2 * 86400 => format!("{}d", s / 86400),
        s if s >= 3600 => format!("{}h", s / 3600),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

async fn revoke(dir: &Path, id_or_token: &str) -> anyhow::Result<()> {
    // A whole token names its id in its claims; read them unverified (the
    // record decides).
    let id = if edgehive_pki::is_token_id(id_or_token) {
        id_or_token.to_owned()
    } else {
        token_id(id_or_token).with_context(|| format!("{id_or_token:?} is neither a token id nor a token"))?
    };
    let client = AdminClient::from_data_dir(dir)?;
    let path = format!("/api/v1/namespaces/{TOKEN_NAMESPACE}/secrets/{}", token_secret_name(&id));
    let (status, answer) = client.call(Method::DELETE, &path, None).await?;
    match status {
        s if s.is_success() => {
            writeln!(std::io::stdout().lock(), "token {id} revoked")?;
            Ok(())
        }
        StatusCode::NOT_FOUND => bail!("no token {id}: `edgehive token list` shows the tokens the cloud accepts"),
        s => bail!("the cloud refused ({s}): {}", message(&answer)),
    }
}

/// The `jti` of a token's claims, read without checking the signature.
fn token_id(token: &str) -> Option<String> {
    use base64::Engine as _;
    let payload = token.split('.').nth(2)?;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).ok()?;
    let claims: Value = serde_json::from_slice(&claims).ok()?;
    claims.get("jti")?.as_str().filter(|id| edgehive_pki::is_token_id(id)).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_id() {
        let ca = edgehive_pki::Ca::generate("t").unwrap();
        let token = edgehive_pki::issue_token(&ca, "abc123", time::OffsetDateTime::now_utc(), Duration::from_secs(60));
        assert_eq!(token_id(&token).as_deref(), Some("abc123"));
        assert_eq!(token_id("a.b"), None);
        assert_eq!(short(time::Duration::hours(23)), "23h");
        assert_eq!(short(time::Duration::days(6)), "6d");
    }
}
