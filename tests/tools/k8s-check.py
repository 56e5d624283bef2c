#!/usr/bin/env python3
"""k8s-check DIR: the Kubernetes manifests in DIR (scripts/k8s) parse as YAML
and hold the settings scripts/k8s/README.md explains. There is no cluster
here: this checks syntax and content, not that a kubelet accepts them.
Prints one line per fact checked; exits 1 with the reasons when one fails."""
import os
import re
import sys

import yaml

SECRET_ENV = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"}
problems = []
facts = []


def need(cond, what):
    (facts if cond else problems).append(what)
    return cond


def main(d):
    docs = []
    for name in sorted(os.listdir(d)):
        if not name.endswith((".yaml", ".yml")):
            continue
        try:
            with open(os.path.join(d, name)) as f:
                docs += [(name, x) for x in yaml.safe_load_all(f) if x is not None]
        except yaml.YAMLError as e:
            problems.append(f"{name}: not YAML: {e}")
    need(docs, f"{len(docs)} YAML documents in {d}")
    jobs = [(n, x) for n, x in docs if x.get("kind") == "Job"]
    secrets = {x["metadata"]["name"]: x for n, x in docs if x.get("kind") == "Secret"}
    if not need(len(jobs) == 1, "one Job"):
        return
    name, job = jobs[0]
    need(job.get("apiVersion") == "batch/v1", "Job is batch/v1")
    spec = job["spec"]
    pod = spec["template"]["spec"]
    need(pod.get("restartPolicy") == "Never", "restartPolicy Never (podFailurePolicy needs it)")
    grace = pod.get("terminationGracePeriodSeconds")
    need(isinstance(grace, int) and grace >= 30, f"terminationGracePeriodSeconds {grace} (>= 30)")
    need(pod.get("hostUsers") is False, "hostUsers: false (a user namespace)")

    rules = spec.get("podFailurePolicy", {}).get("rules", [])
    codes = {}
    for r in rules:
        oc = r.get("onExitCodes")
        if oc:
            need(oc.get("operator") == "In", f"exit-code rule {r['action']} uses operator In")
            for v in oc.get("values", []):
                codes[v] = r["action"]
    need(codes.get(75) == "Ignore", "exit 75 (checkpointed, stopped) retried, not counted")
    need(76 not in codes or codes[76] == "Count", "exit 76 (stopped, not saved) counted against backoffLimit")
    need(codes.get(64) == "FailJob" and codes.get(2) == "FailJob", "exits 64 and 2 fail the Job")
    need(any(c.get("type") == "DisruptionTarget" and r["action"] == "Ignore"
             for r in rules for c in r.get("onPodConditions", [])), "disruptions (preemption) not counted")
    need(isinstance(spec.get("backoffLimit"), int), "backoffLimit set")

    cs = pod["containers"]
    need(len(cs) == 1, "one container")
    c = cs[0]
    for r in rules:
        oc = r.get("onExitCodes")
        if oc:
            need(oc.get("containerName") == c["name"], f"rule {r['action']} names container {c['name']}")
    cmd = c.get("command", []) + c.get("args", [])
    need(cmd and cmd[0].endswith("/ckrun"), "the entry point is ckrun")
    need("--resume" in cmd, "ckrun --resume (the same line starts and resumes)")
    env = {e["name"]: e for e in c.get("env", [])}
    for e in env.values():
        need(e["name"] not in SECRET_ENV, f"{e['name']}: no credential in the environment")
        need("secretKeyRef" not in e.get("valueFrom", {}), f"{e['name']}: not from a Secret")
    for ref in set(re.findall(r"\$\((\w+)\)", " ".join(cmd))):
        need(ref in env, f"$({ref}) is defined in env")
    jn = env.get("JOB_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
    need(re.fullmatch(r"metadata\.labels\['(batch\.kubernetes\.io/)?job-name'\]", jn) is not None,
         "JOB_NAME from the downward API (the Job's name label)")
    store = cmd[cmd.index("--store") + 1] if "--store" in cmd else ""
    need(store.startswith("s3://") and "$(JOB_NAME)" in store, f"store {store} from the Job's name")

    credfile = env.get("AWS_SHARED_CREDENTIALS_FILE", {}).get("value", "")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    ok = False
    for m in c.get("volumeMounts", []):
        v = vols.get(m["name"], {})
        if "secret" in v and credfile.startswith(m["mountPath"].rstrip("/") + "/"):
            ok = need(m.get("readOnly") is True, "the credentials volume is read-only")
            need(v["secret"].get("defaultMode") in (0o400, 0o600), "the credentials file is 0400/0600")
            key = credfile[len(m["mountPath"].rstrip("/")) + 1:]
            sec = secrets.get(v["secret"]["secretName"])
            if sec is not None:
                need(key in sec.get("stringData", {}) or key in sec.get("data", {}),
                     f"Secret {v['secret']['secretName']} holds key {key}")
    need(ok, f"AWS_SHARED_CREDENTIALS_FILE {credfile} lies in a Secret volume")

    sc = c.get("securityContext", {})
    caps = sc.get("capabilities", {})
    need(caps.get("drop") == ["ALL"] and caps.get("add") == ["SYS_ADMIN"],
         "capabilities: drop ALL, add SYS_ADMIN only (the set tests/suite/47-podman.sh runs with)")
    need(sc.get("privileged") is not True, "not privileged")
    need(sc.get("allowPrivilegeEscalation") is not False, "allowPrivilegeEscalation not false (refused next to SYS_ADMIN)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: k8s-check.py DIR", file=sys.stderr)
        sys.exit(64)
    try:
        main(sys.argv[1])
    except (KeyError, TypeError, AttributeError, ValueError, OSError) as e:
        problems.append(f"malformed manifest: {type(e).__name__}: {e}")
    for p in problems:
        print(f"missing: {p}")
    if not problems:
        print(f"{len(facts)} checks: YAML parses; Job, podFailurePolicy, grace, Secret file, downward API, securityContext as documented")
    sys.exit(1 if problems else 0)
