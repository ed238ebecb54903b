"""Policy: the risk of a call, ratings of unlabeled tools, approvals, guardrails, `tools plan`, stop reports.

The shell asks `Policy` about every call (`assess` before a script starts and for `tools plan`,
`check` just before a call is made); `plan.scan` finds the calls of a script without running it;
`ScriptReport` is the `tools` part of a `bash` result.
"""

from __future__ import annotations

from toolshell.config.patterns import ToolPattern, parse_pattern
from toolshell.policy.approvals import ApprovalRequest, Approvals
from toolshell.policy.canonical import canonical_json, fingerprint, schema_hash
from toolshell.policy.guardrails import GuardCall, Guardrail, Guardrails, RegexGuard
from toolshell.policy.plan import Scan, ScannedCall, plan_json, plan_json_async, scan
from toolshell.policy.policy import Policy
from toolshell.policy.rating import (
    CallableRater,
    CommandRater,
    HeuristicRater,
    Rater,
    RaterFailed,
    Ratings,
    heuristic_rating,
    make_rater,
)
from toolshell.policy.report import NOT_REACHED, ScriptReport
from toolshell.policy.risk import (
    BLOCKED,
    CHANGES,
    CHECKED_AT_RUN_TIME,
    NEEDS_APPROVAL,
    READ_ONLY,
    Risk,
    is_unlabeled,
    judge,
)

__all__ = [
    "BLOCKED",
    "CHANGES",
    "CHECKED_AT_RUN_TIME",
    "NEEDS_APPROVAL",
    "NOT_REACHED",
    "READ_ONLY",
    "ApprovalRequest",
    "Approvals",
    "CallableRater",
    "CommandRater",
    "GuardCall",
    "Guardrail",
    "Guardrails",
    "HeuristicRater",
    "Policy",
    "Rater",
    "RaterFailed",
    "Ratings",
    "RegexGuard",
    "Risk",
    "Scan",
    "ScannedCall",
    "ScriptReport",
    "ToolPattern",
    "canonical_json",
    "fingerprint",
    "heuristic_rating",
    "is_unlabeled",
    "judge",
    "make_rater",
    "parse_pattern",
    "plan_json",
    "plan_json_async",
    "scan",
    "schema_hash",
]
