"""What the doctor found: findings with a severity and a stable code, and the verdict on a share."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primacy.nfs_profiles.mountinfo import MountEntry
from primacy.nfs_profiles.profiles import Profile


class Severity(enum.IntEnum):
    """How bad a finding is; the worst one is the doctor's exit code."""

    OK = 0
    WARNING = 1
    REFUSED = 2


@dataclass(frozen=True)
class Finding:
    """One checked thing: a mount option, the filesystem, a round trip."""

    severity: Severity
    subject: str
    message: str
    code: str | None = None
    why: str = ""
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity.name.lower(),
            "code": self.code,
            "subject": self.subject,
            "message": self.message,
            "why": self.why,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class Diagnosis:
    """The doctor's verdict on one share path."""

    path: Path
    mount: MountEntry | None
    profile: Profile | None
    findings: tuple[Finding, ...] = field(default=())

    @property
    def severity(self) -> Severity:
        return max((finding.severity for finding in self.findings), default=Severity.OK)

    @property
    def exit_code(self) -> int:
        return int(self.severity)

    @property
    def refused(self) -> bool:
        return self.severity is Severity.REFUSED

    @property
    def problems(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.severity is not Severity.OK)

    def summary(self) -> str:
        """One line for a log: the worst problem with its code and why it matters."""
        where = (
            f"{self.path} ({self.mount.fs_type} on {self.mount.mount_point})"
            if self.mount
            else str(self.path)
        )
        if not self.problems:
            return f"the share {where} passes every check"
        worst = max(self.problems, key=lambda finding: finding.severity)
        more = len(self.problems) - 1
        tail = f" (and {more} more; run `primacy doctor {self.path}`)" if more else ""
        reason = f"; {worst.why}" if worst.why else ""
        return f"{worst.code} the share {where}: {worst.subject}: {worst.message}{reason}{tail}"

    def to_dict(self) -> dict[str, Any]:
        mount = None
        if self.mount is not None:
            mount = {
                "mount_point": self.mount.mount_point,
                "fs_type": self.mount.fs_type,
                "source": self.mount.source,
                "options": self.mount.options,
            }
        profile = None
        if self.profile is not None:
            timings = self.profile.timings
            profile = {
                "name": self.profile.name,
                "lock_method": self.profile.lock_method,
                "lock_acquire_sleep_interval_ms": timings.lock_acquire_sleep_interval_ms,
                "lock_keep_alive_period_ms": timings.lock_keep_alive_period_ms,
                "watchdog_s": timings.watchdog_s,
                "stall_takeover_ms": timings.stall_takeover_ms,
                "mount_options": self.profile.mount_options,
            }
        return {
            "path": str(self.path),
            "verdict": self.severity.name.lower(),
            "exit_code": self.exit_code,
            "mount": mount,
            "profile": profile,
            "findings": [finding.to_dict() for finding in self.findings],
        }


def render_text(diagnosis: Diagnosis) -> str:
    """The doctor's report for people: every check, and why and how to fix each problem."""
    lines = [f"primacy doctor {diagnosis.path}"]
    if diagnosis.mount is not None:
        mount = diagnosis.mount
        lines.append(f"  mount:   {mount.source} on {mount.mount_point} type {mount.fs_type}")
    if diagnosis.profile is not None:
        profile, timings = diagnosis.profile, diagnosis.profile.timings
        lines.append(f"  profile: {profile.name} ({profile.description})")
        lines.append(f"  lock:    lock_method = {profile.lock_method!r}")
        lines.append(
            "  timings: "
            f"lock_acquire_sleep_interval_ms = {timings.lock_acquire_sleep_interval_ms}, "
            f"lock_keep_alive_period_ms = {timings.lock_keep_alive_period_ms}, "
            f"watchdog_s = {timings.watchdog_s}"
            + (
                f", stall_takeover_ms = {timings.stall_takeover_ms}"
                if timings.stall_takeover_ms
                else ""
            )
        )
    lines.append("")
    for finding in diagnosis.findings:
        label = "ok" if finding.severity is Severity.OK else finding.severity.name
        code = f"{finding.code} " if finding.code else ""
        lines.append(f"  {label:<8} {code}{finding.subject}: {finding.message}")
        if finding.severity is not Severity.OK:
            if finding.why:
                lines.append(f"           why: {finding.why}")
            if finding.fix:
                lines.append(f"           fix: {finding.fix}")
    lines.append("")
    lines.append(f"verdict: {diagnosis.severity.name.lower()} (exit {diagnosis.exit_code})")
    return "\n".join(lines) + "\n"
