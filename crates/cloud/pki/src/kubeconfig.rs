//! A kubeconfig file that `kubectl` and client libraries accept as is.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// A kubeconfig with one cluster, one user and one context, all called
/// `name`, and `current-context` set to it, so that
/// `kubectl --kubeconfig FILE get nodes` works with no other flag.
///
/// The CA certificate, client certificate and client key are embedded as
/// `certificate-authority-data`, `client-certificate-data` and
/// `client-key-data`: base64 of the PEM text, as kubeadm writes them. The
/// result holds a private key: write it with [`crate::write_private_file`].
///
/// ```
/// let yaml = edgehive_pki::kubeconfig("https://127.0.0.1:6443", "CA PEM", "CERT PEM", "KEY PEM", "edgehive");
/// assert!(yaml.contains("current-context: \"edgehive\"\n"));
/// ```
pub fn kubeconfig(server_url: &str, ca_pem: &str, client_cert_pem: &str, client_key_pem: &str, name: &str) -> String {
    let name = quote(name);
    let mut out = String::with_capacity(ca_pem.len() * 2 + client_cert_pem.len() * 2 + client_key_pem.len() * 2 + 512);
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: {name}\n  \
           cluster:\n    \
             server: {server}\n    \
             certificate-authority-data: {ca}\n\
         users:\n\
         - name: {name}\n  \
           user:\n    \
             client-certificate-data: {cert}\n    \
             client-key-data: {key}\n\
         contexts:\n\
         - name: {name}\n  \
           context:\n    \
             cluster: {name}\n    \
             user: {name}\n\
         current-context: {name}\n\
         preferences: {{}}\n",
        server = quote(server_url),
        ca = STANDARD.encode(ca_pem),
        cert = STANDARD.encode(client_cert_pem),
        key = STANDARD.encode(client_key_pem),
    );
    out
}

/// A YAML double-quoted scalar: safe for any string (a name like `yes`,
/// `1.0` or `a: b` would otherwise change type or structure).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_escapes_what_yaml_needs() {
        assert_eq!(quote("edgehive"), "\"edgehive\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote("a\nb"), "\"a\\u000Ab\"");
    }

    #[test]
    fn layout_is_what_kubectl_reads() {
        let yaml = kubeconfig("https://h:6443", "A", "B", "C", "n");
        let expected = "apiVersion: v1\n\
            kind: Config\n\
            clusters:\n\
            - name: \"n\"\n  cluster:\n    server: \"https://h:6443\"\n    certificate-authority-data: QQ==\n\
            users:\n\
            - name: \"n\"\n  user:\n    client-certificate-data: Qg==\n    client-key-data: Qw==\n\
            contexts:\n\
            - name: \"n\"\n  context:\n    cluster: \"n\"\n    user: \"n\"\n\
            current-context: \"n\"\n\
            preferences: {}\n";
        assert_eq!(yaml, expected);
    }
}
