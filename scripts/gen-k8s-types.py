#!/usr/bin/env python3
"""Writes crates/cloud/registry/src/validation/schema/builtin.rs: the Go-type tables of every built-in kind
the API server serves, to any depth.

The field names, JSON types, formats and required fields are the Kubernetes API's own (its OpenAPI
definitions, as the k8s-openapi crate carries them for the version the workspace pins). A throwaway
program built against k8s-openapi (with its `schemars` feature) prints those definitions as JSON; this
script turns them into Rust statics. Descriptions are not copied (kubectl explain shows `<empty>`).

Usage: python3 scripts/gen-k8s-types.py [definitions.json]
Without an argument the dump program is built in a temporary directory (needs cargo and crates.io).
"""

import json
import os
import re
import subprocess
import sys
import tempfile

K8S_OPENAPI_FEATURE = "v1_33"

# The kinds served (with storage or as request kinds) and the types their documents refer to.
ROOTS = """
api::core::v1::Pod api::core::v1::ConfigMap api::core::v1::Secret api::core::v1::Service
api::core::v1::Endpoints api::core::v1::Event api::core::v1::Namespace api::core::v1::Node
api::core::v1::ServiceAccount api::coordination::v1::Lease
api::apps::v1::Deployment api::apps::v1::ReplicaSet api::apps::v1::DaemonSet api::apps::v1::StatefulSet
api::apps::v1::ControllerRevision api::batch::v1::Job api::batch::v1::CronJob
api::policy::v1::PodDisruptionBudget api::policy::v1::Eviction api::autoscaling::v1::Scale
api::discovery::v1::EndpointSlice api::events::v1::Event
api::rbac::v1::Role api::rbac::v1::ClusterRole api::rbac::v1::RoleBinding api::rbac::v1::ClusterRoleBinding
api::authorization::v1::SelfSubjectAccessReview api::authorization::v1::SubjectAccessReview
api::authorization::v1::SelfSubjectRulesReview api::authorization::v1::LocalSubjectAccessReview
api::authentication::v1::TokenRequest api::authentication::v1::SelfSubjectReview
api::authentication::v1::TokenReview
apimachinery::pkg::apis::meta::v1::DeleteOptions
apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition
""".split()

DUMP_MAIN = """
use schemars::generate::SchemaSettings;
fn main() {
    let mut g = SchemaSettings::openapi3().into_generator();
    %s
    println!("{}", serde_json::to_string_pretty(&g.take_definitions(true)).unwrap());
}
"""

PKGS = {
    "io.k8s.api.core.v1": "Core",
    "io.k8s.apimachinery.pkg.apis.meta.v1": "Meta",
    "io.k8s.api.apps.v1": "Apps",
    "io.k8s.api.batch.v1": "Batch",
    "io.k8s.api.coordination.v1": "Coordination",
    "io.k8s.api.policy.v1": "Policy",
    "io.k8s.api.autoscaling.v1": "Autoscaling",
    "io.k8s.api.discovery.v1": "Discovery",
    "io.k8s.api.events.v1": "Events",
    "io.k8s.api.rbac.v1": "Rbac",
    "io.k8s.api.authorization.v1": "Authorization",
    "io.k8s.api.authentication.v1": "Authentication",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1": "Apiextensions",
}


def definition_name(root):
    """The OpenAPI definition name of a k8s-openapi path (the crate spells `apiextensions-apiserver` with `_`)."""
    return "io.k8s." + root.replace("::", ".").replace("apiextensions_apiserver", "apiextensions-apiserver")

# Types with their own JSON form: no struct table.
SCALARS = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "Ty::Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "Ty::IntOrStr",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "Ty::Time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "Ty::Time",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "Ty::Raw",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": "Ty::Any",
    # Free JSON, or decoded by their own UnmarshalJSON (a schema or a bool, a schema or a list).
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON": "Ty::Any",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray": "Ty::Any",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool": "Ty::Any",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray": "Ty::Any",
}


def dump():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "src"))
        with open(os.path.join(d, "Cargo.toml"), "w") as f:
            f.write(
                '[package]\nname = "k8sdump"\nversion = "0.1.0"\nedition = "2021"\n[workspace]\n'
                "[dependencies]\n"
                f'k8s-openapi = {{ version = "0.29", features = ["{K8S_OPENAPI_FEATURE}", "schemars"] }}\n'
                'schemars = "1"\nserde_json = "1"\n'
            )
        calls = "\n    ".join(f"let _ = g.subschema_for::<k8s_openapi::{r}>();" for r in ROOTS)
        with open(os.path.join(d, "src", "main.rs"), "w") as f:
            f.write(DUMP_MAIN % calls)
        out = subprocess.run(["cargo", "run", "-q", "--release"], cwd=d, check=True, capture_output=True)
        return json.loads(out.stdout)


def split(name):
    prefix, go = name.rsplit(".", 1)
    return prefix, go


def snake(go):
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", go)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.upper()


def main():
    defs = json.load(open(sys.argv[1])) if len(sys.argv) > 1 else dump()
    # Only what the roots reach (a given dump may hold more).
    def refs(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "$ref" and isinstance(x, str):
                    yield x.rsplit("/", 1)[1]
                else:
                    yield from refs(x)
        elif isinstance(v, list):
            for x in v:
                yield from refs(x)

    todo = [definition_name(r) for r in ROOTS]
    reached = set()
    while todo:
        n = todo.pop()
        if n not in reached:
            reached.add(n)
            todo.extend(refs(defs[n]))
    structs = {n: d for n, d in defs.items() if n not in SCALARS and n in reached}
    gos = {}
    for n in structs:
        gos.setdefault(split(n)[1], []).append(n)
    static = {}
    for n in structs:
        prefix, go = split(n)
        if prefix not in PKGS:
            sys.exit(f"unknown package {prefix}")
        clash = len(gos[go]) > 1 and prefix != "io.k8s.api.core.v1"
        static[n] = (PKGS[prefix].upper() + "_" if clash else "") + snake(go)

    def ty(p):
        if "allOf" in p:
            return ty(p["allOf"][0])
        if "$ref" in p:
            ref = p["$ref"].rsplit("/", 1)[1]
            if ref in SCALARS:
                return SCALARS[ref]
            return f"Ty::Obj(&{static[ref]})"
        t, fmt = p.get("type"), p.get("format")
        if t == "string":
            return "Ty::Bytes" if fmt == "byte" else "Ty::Str"
        if t == "integer":
            return "Ty::I32" if fmt == "int32" else "Ty::I64"
        if t == "number":
            return "Ty::F64"
        if t == "boolean":
            return "Ty::Bool"
        if t == "array":
            return f"Ty::List(&{ty(p['items'])})"
        if t == "object" and isinstance(p.get("additionalProperties"), dict):
            return f"Ty::Map(&{ty(p['additionalProperties'])})"
        if t == "object" or t is None:
            return "Ty::Any"
        sys.exit(f"unknown type {p}")

    out = [
        "//! Generated by scripts/gen-k8s-types.py from the Kubernetes API's OpenAPI definitions (k8s-openapi, "
        f"feature {K8S_OPENAPI_FEATURE}): do not edit.",
        "//! Every struct of every built-in kind served, with its JSON fields, their types and the required fields.",
        "",
        "use super::{Pkg, Struct, Ty};",
        "",
    ]
    for n in sorted(structs, key=lambda n: static[n]):
        d = structs[n]
        prefix, go = split(n)
        fields = "".join(f'(\"{f}\", {ty(p)}), ' for f, p in sorted(d.get("properties", {}).items()))
        req = "".join(f'"{r}", ' for r in d.get("required", []))
        out.append(
            f"pub(crate) static {static[n]}: Struct = Struct {{ go: \"{go}\", pkg: Pkg::{PKGS[prefix]}, "
            f"fields: &[{fields}], required: &[{req}] }};"
        )
    path = os.path.join(os.path.dirname(__file__), "..", "crates/cloud/registry/src/validation/schema/builtin.rs")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    subprocess.run(["rustfmt", "--edition", "2024", "--config", "max_width=120", path], check=True)


if __name__ == "__main__":
    main()
