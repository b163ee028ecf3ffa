"""The official Kubernetes Python client against edgehive's authorization APIs:
a SelfSubjectAccessReview (allowed for the admin, and a path review), and a
TokenRequest for a service account whose token then authenticates. Prints
"ok" when every check passed; any failure raises."""

import kubernetes
from kubernetes import client, config

config.load_kube_config()
api = client.ApiClient()
authz = client.AuthorizationV1Api(api)
core = client.CoreV1Api(api)

review = authz.create_self_subject_access_review(
    client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(namespace="default", verb="delete", resource="secrets")
        )
    )
)
assert review.status.allowed is True, review

review = authz.create_self_subject_access_review(
    client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            non_resource_attributes=client.V1NonResourceAttributes(path="/version", verb="get")
        )
    )
)
assert review.status.allowed is True, review

# A question about another user: `builder` has view in default.
review = authz.create_subject_access_review(
    client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user="system:serviceaccount:default:builder",
            resource_attributes=client.V1ResourceAttributes(namespace="default", verb="list", resource="pods"),
        )
    )
)
assert review.status.allowed is True, review
assert "RoleBinding" in (review.status.reason or ""), review

answer = core.create_namespaced_service_account_token(
    "builder",
    "default",
    client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=["https://kubernetes.default.svc.cluster.local"], expiration_seconds=900)
    ),
)
token = answer.status.token
assert token and answer.status.expiration_timestamp is not None, answer
assert answer.spec.expiration_seconds == 900, answer

# TokenReview: who the token names; a token for another audience does not authenticate.
authn = client.AuthenticationV1Api(api)
tr = authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token)))
assert tr.status.authenticated is True, tr
assert tr.status.user.username == "system:serviceaccount:default:builder", tr
assert "system:serviceaccounts:default" in tr.status.user.groups, tr
other = core.create_namespaced_service_account_token(
    "builder", "default", client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=["vault"]))
).status.token
tr = authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token=other)))
assert tr.status.authenticated is not True and tr.status.error, tr
tr = authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token=other, audiences=["vault"])))
assert tr.status.authenticated is True and tr.status.audiences == ["vault"], tr

# The token authenticates as the service account.
cfg = client.Configuration.get_default_copy()
cfg.cert_file = None
cfg.key_file = None
cfg.api_key = {"authorization": "Bearer " + token}
as_builder = client.CoreV1Api(client.ApiClient(cfg))
pods = as_builder.list_namespaced_pod("default")
assert pods.kind in (None, "PodList"), pods
try:
    as_builder.list_namespaced_secret("default")
    raise AssertionError("the service account read secrets")
except kubernetes.client.exceptions.ApiException as e:
    assert e.status == 403, e

print("ok")
