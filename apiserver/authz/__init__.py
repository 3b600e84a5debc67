"""Who is calling and what they may do: authentication, RBAC and access reviews.

`identity` turns a bearer token into a user (the admin token, and kube's static token file for
per-component identities); `attributes` reads a request as kube's authorizer sees it (verb,
group, resource, subresource, namespace, name, or a non-resource path); `rbac` decides from the
stored Roles, ClusterRoles and bindings; `bootstrap` creates kube's default ClusterRoles;
`reviews` answers SelfSubjectAccessReview and SubjectAccessReview; `gate` puts it all in front
of the handlers, with kube's 401 and 403 bodies.
"""
