//! `edgehive node revoke NAME`: none of the node's certificates is accepted
//! from now on, to connect or to renew; its Node is deleted (which ends its
//! session). To bring the machine back, give it a new join token.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use edgehive_credentials::records::{NODE_NAMESPACE, NodeRecord};
use http::{Method, StatusCode};
use serde_json::json;

use crate::admin::AdminClient;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Revoke a node: its certificates stop working at once and its Node is
    /// deleted.
    Revoke {
        /// The cloud's data directory (as given to `edgehive cloud`).
        #[arg(long, env = "EDGEHIVE_DATA_DIR", default_value_os_t = crate::cloud::default_data_dir())]
        data_dir: PathBuf,
        /// Keep the Node object (and so its pods' bindings); the node still
        /// cannot connect.
        #[arg(long)]
        keep_node: bool,
        /// The node.
        name: String,
    },
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Command::Revoke { data_dir, keep_node, name } = args.command;
    if let Some(why) = edgehive_registry::validation::dns1123_subdomain(&name).first() {
        bail!("{name:?} is not a node name: {why}");
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("start the runtime")?;
    rt.block_on(async {
        let client = AdminClient::from_data_dir(&data_dir)?;
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NODE_NAMESPACE}});
        let (status, _) = client.call(Method::POST, "/api/v1/namespaces", Some(&namespace)).await?;
        if !status.is_success() && status != StatusCode::CONFLICT {
            bail!("create namespace {NODE_NAMESPACE}: the cloud answered {status}");
        }
        record_revocation(&client, &name).await?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "node {name}: certificates revoked")?;
        if !keep_node {
            let (status, answer) = client.call(Method::DELETE, &format!("/api/v1/nodes/{name}"), None).await?;
            match status {
                s if s.is_success() => writeln!(out, "node {name}: Node deleted")?,
                StatusCode::NOT_FOUND => writeln!(out, "node {name}: no Node to delete")?,
                s => bail!("delete node {name}: the cloud answered {s}: {answer}"),
            }
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the revocation over the node's record, keeping when the last
/// certificate it covered expires (until then the record must stay, so
/// the cloud keeps it). A write that meets another one (a renewal, a
/// join) reads again and retries.
async fn record_revocation(client: &AdminClient, name: &str) -> anyhow::Result<()> {
    let path = format!("/api/v1/namespaces/{NODE_NAMESPACE}/secrets/{name}");
    for _ in 0..5 {
        let mut record = NodeRecord::revoked(name, time::OffsetDateTime::now_utc());
        let (status, current) = client.call(Method::GET, &path, None).await?;
        let status = match status {
            StatusCode::OK => {
                record.last_expiry = NodeRecord::from_secret(&current).ok().and_then(|r| r.spent_after());
                let mut body = record.to_secret();
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
                client.call(Method::PUT, &path, Some(&body)).await?.0
            }
            StatusCode::NOT_FOUND => {
                let secrets = format!("/api/v1/namespaces/{NODE_NAMESPACE}/secrets");
                client.call(Method::POST, &secrets, Some(&record.to_secret())).await?.0
            }
            s => bail!("read the record of node {name}: the cloud answered {s}"),
        };
        match status {
            s if s.is_success() => return Ok(()),
            StatusCode::CONFLICT => continue,
            s => bail!("record the revocation: the cloud answered {s}"),
        }
    }
    bail!("record the revocation: the record of node {name} kept changing; try again")
}
