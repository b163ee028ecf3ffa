//! `edgehive inspect`: decode wire messages and explain them.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use edgehive_model::{Message, ResourcePath, resource::split_node_prefix};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Print each message re-encoded as edgehive writes it, instead of a summary.
    #[arg(long)]
    reencode: bool,
}

/// Reads stdin line by line; exits 1 if any line is not a valid message.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut bad = 0usize;
    for (n, line) in stdin.lock().lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match Message::decode(line.as_bytes()) {
            Err(e) => {
                bad += 1;
                writeln!(out, "line {}: invalid: {e}", n + 1)?;
            }
            Ok(m) if args.reencode => {
                out.write_all(&m.encode())?;
                writeln!(out)?;
            }
            Ok(m) => writeln!(out, "line {}: {}", n + 1, describe(&m))?,
        }
    }
    Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn describe(m: &Message) -> String {
    let r = &m.route;
    let mut s = format!("{} {} {} from {} (group {})", m.header.msg_id, r.operation, r.resource, r.source, r.group);
    if let Some(p) = m.parent_id() {
        s.push_str(&format!(", response to {p}"));
    }
    if !m.header.resource_version.is_empty() {
        s.push_str(&format!(", resourceVersion {}", m.header.resource_version));
    }
    let form = if let Ok(nr) = ResourcePath::parse_cloud(&r.resource) {
        format!("cloud-internal path for node {}, {} {}", nr.node, nr.path.resource_type, nr.path.namespace_token())
    } else if split_node_prefix(&r.resource).is_ok() {
        String::from("cloud-internal path")
    } else if let Ok(p) = ResourcePath::parse_wire(&r.resource) {
        format!("wire path, type {} in namespace {}", p.resource_type, p.namespace_token())
    } else {
        String::from("non-object resource")
    };
    s.push_str(&format!("; {form}; content {} bytes", m.content.encoded_len()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_an_ack() {
        let m = Message::decode(br#"{"header":{"msg_id":"b","parent_msg_id":"a","timestamp":1},"route":{"source":"edgecontroller","group":"resource","operation":"response","resource":"default/pod/nginx"},"content":"OK"}"#).unwrap();
        let d = describe(&m);
        assert!(d.contains("response default/pod/nginx"), "{d}");
        assert!(d.contains("response to a"), "{d}");
        assert!(d.contains("wire path, type pod in namespace default"), "{d}");
    }
}
