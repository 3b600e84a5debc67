"""Validating admission webhooks, called as kube-apiserver calls them (admissionregistration.k8s.io/v1).

`config` parses and validates ValidatingWebhookConfigurations, `matching` decides which webhooks
a write goes to, `review` builds the AdmissionReview and spells the errors, `caller` posts it over
HTTPS, `dispatcher.Admission` ties them into the one step the registry awaits before storing,
and `strategy` keeps `Admission` in step with the stored configurations.
"""

from apiserver.admission.dispatcher import ANONYMOUS, USER, Admission
from apiserver.admission.strategy import WebhookConfigurationStrategy

__all__ = ["ANONYMOUS", "USER", "Admission", "WebhookConfigurationStrategy"]
