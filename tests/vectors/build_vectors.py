#!/usr/bin/env python3
"""Writes the derive conformance vectors (tests/vectors/*.json).

Each scenario below lists its events and, after every event, the status and
process-alive the derive rules give, plus fuller expectations at chosen
checkpoints. Every expected value here was reasoned from the rules in
docs/events.md "Derived state" and the doc comments of client-rs/protocol/src/derive; none
was produced by running an implementation, so the vectors can fail one.

Event shapes follow the real CLI 2.1.197 recordings in the shared
cli-transcripts (bg_bash, subagent, can_use_tool_*, compact, interrupt_*,
mid_turn_user, cron_create_fire_replay, schedule_wakeup, api_error_529_retry).
Run: python3 tests/vectors/build_vectors.py  (rewrites every *.json here).
"""
import json
import os

from vector_files import write_vectors

HERE = os.path.dirname(os.path.abspath(__file__))
I, ST, SR, SP = "idle", "starting", "streaming", "stopping"
MODEL = "claude-sonnet-4-5"


def u64(n):
    return str(n)


def clean(v):
    """Drops proto3 default scalars (what pbjson omits); keeps messages."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k in ("exitCode", "maxThinkingTokens"):  # optional: present even when 0
                out[k] = x
                continue
            # "0" is also a real string: a setting's value, Codex's first request id.
            if x in ("", 0, False, "0", None, []) and not (k in ("value", "requestId") and x == "0"):
                continue
            out[k] = clean(x) if k not in ("input", "toolUseResult", "rawInput") else x
        return out
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v


def usage(i=0, o=0, cc=0, cr=0):
    return {"inputTokens": u64(i), "outputTokens": u64(o),
            "cacheCreationInputTokens": u64(cc), "cacheReadInputTokens": u64(cr)}


# ---- payload builders -------------------------------------------------------

def run_start(prompt="", adapter="interactive", trigger="start", resume="", lost="", model="",
              mode="", thinking=None, agent=""):
    config = {"prompt": prompt, "cwd": "/srv/demo/work", "resume": resume, "model": model,
              "permissionMode": mode, "agent": agent}
    if thinking is not None:
        config["maxThinkingTokens"] = thinking
    return ("runStart", {"config": config, "adapter": adapter, "trigger": trigger,
                         "lostResumeId": lost, "agent": agent})


def run_ready(resume_id, pid=4242, model=MODEL, mode="default"):
    return ("runReady", {"resumeId": resume_id, "model": model,
                         "tools": ["Task", "Bash", "Read", "Edit", "Write"],
                         "cwd": "/srv/demo/work", "mcpServers": [], "permissionMode": mode,
                         "cliVersion": "2.1.197", "pid": pid})


def setting(which, value, applied="LIVE"):
    return ("settingChanged", {"setting": "SETTING_" + which, "value": value,
                               "applied": "SETTING_APPLIED_" + applied})


def run_end(reason, exit_code=None, signal="", inferred=False, source="process", stderr=""):
    p = {"reason": "RUN_END_REASON_" + reason, "signal": signal, "inferred": inferred,
         "source": source, "stderrTail": stderr}
    if exit_code is not None:
        p["exitCode"] = exit_code
    return ("runEnd", p)


def run_error(message, kind, resume_id=""):
    return ("runError", {"message": message, "kind": kind, "resumeId": resume_id})


def stop(source="user"):
    return ("stopRequested", {"source": source})


def text(t):
    return {"type": "text", "text": t}


def thinking(t):
    return {"type": "thinking", "thinking": t}


def tool_use(tid, name, inp):
    return {"type": "tool_use", "toolUseId": tid, "toolName": name, "input": inp}


_msg = [0]


def content(*blocks, u=(12, 1, 0, 0), parent="", model=MODEL, stop_reason="", error="", msg=None):
    _msg[0] += 1
    return ("content", {"messageId": msg or "msg_%03d" % _msg[0], "model": model,
                        "blocks": list(blocks), "usage": usage(*u),
                        "parentToolUseId": parent, "stopReason": stop_reason, "error": error})


def result(*trs, text_="", parent="", tur=None):
    p = {"toolResults": [{"toolUseId": t[0], "text": t[1], "isError": t[2] if len(t) > 2 else False}
                         for t in trs],
         "isError": any(len(t) > 2 and t[2] for t in trs), "parentToolUseId": parent, "text": text_}
    if tur is not None:
        p["toolUseResult"] = tur
    return ("result", p)


def turn_end(u=(12, 7, 0, 0), cost=0.000141, is_error=False, compact=False, reason="completed",
             subtype="success", num_turns=1, res="", origin="", window=200000, models=None,
             compact_trigger="", pre_tokens=0, api_status=0, errors=()):
    if models is None:
        models = [] if compact else [(MODEL, u, cost, window)]
    mu = [{"model": m, "inputTokens": u64(mu_[0]), "outputTokens": u64(mu_[1]),
           "cacheReadInputTokens": u64(mu_[3]), "cacheCreationInputTokens": u64(mu_[2]),
           "costUsd": c, "contextWindow": u64(w), "maxOutputTokens": u64(32000)}
          for (m, mu_, c, w) in models]
    return ("turnEnd", {"usage": usage(*u), "costUsd": cost,
                        "durationMs": u64(55), "durationApiMs": u64(17),
                        "isError": is_error, "compact": compact, "terminalReason": reason,
                        "subtype": subtype, "numTurns": num_turns, "result": res, "origin": origin,
                        "modelUsage": mu, "compactTrigger": compact_trigger,
                        "compactPreTokens": u64(pre_tokens), "apiErrorStatus": api_status,
                        "errors": list(errors)})


def title_set(title):
    return ("titleSet", {"title": title})


def at(seq):
    """Unix milliseconds of the time V.ev gives event `seq` (createdAt, updatedAt)."""
    return 1795986000000 + (seq // 60 % 60) * 60000 + (seq % 60) * 1000


def compact_boundary(trigger="manual", pre=19):
    return ("turnEnd", {"usage": usage(), "compact": True, "compactTrigger": trigger,
                        "compactPreTokens": u64(pre)})


def inp(t, source="USER"):
    return ("inputSent", {"text": t, "source": "INPUT_SOURCE_" + source})


def turn_start(origin=""):
    return ("turnStart", {"origin": origin})


def task_started(tid, ttype, desc, tool_use_id, subagent_type="", prompt=""):
    return ("taskStarted", {"taskId": tid, "taskType": ttype, "description": desc,
                            "toolUseId": tool_use_id, "subagentType": subagent_type, "prompt": prompt})


def task_updated(tid, status="", summary="", error="", last_tool="", tokens=0, tool_uses=0, desc=""):
    return ("taskUpdated", {"taskId": tid, "status": status, "description": desc, "error": error,
                            "summary": summary, "lastToolName": last_tool,
                            "totalTokens": u64(tokens), "toolUses": tool_uses})


def task_note(tid, tool_use_id, status, output_file="", summary=""):
    return ("taskNotification", {"taskId": tid, "toolUseId": tool_use_id, "status": status,
                                 "outputFile": output_file, "summary": summary})


def perm_req(rid, tool, inp_, tool_use_id, reason=""):
    return ("permissionRequested", {"requestId": rid, "toolName": tool, "input": inp_,
                                    "suggestions": [], "toolUseId": tool_use_id,
                                    "decisionReason": reason})


def unreadable(size, reason="failed to decode Protobuf message: recursion limit reached"):
    return "unreadable", {"reason": reason, "size": u64(size)}


def perm_res(rid, allow, by="user", message="", updated=None):
    p = {"requestId": rid, "allow": allow, "by": by, "message": message}
    if updated is not None:
        p["updatedInput"] = updated
    return ("permissionResolved", p)


# ---- scenario builder -------------------------------------------------------

ALL = []


class V:
    def __init__(self, name, description, session="sess-1"):
        self.name, self.description, self.session = name, description, session
        self.events, self.expect = [], {}
        self.run = ""
        self.runs = 0
        _msg[0] = 0
        self.check(I, False)  # an empty log: idle, no process
        ALL.append(self)

    def ev(self, payload, status, alive, run=None, **exp):
        key, body = payload
        if key == "runStart" and run is None:
            self.runs += 1
            self.run = "run-%d" % self.runs
        seq = len(self.events) + 1
        e = {"seq": u64(seq), "sessionId": self.session,
             "runId": self.run if run is None else run,
             "time": "2026-11-29T21:%02d:%02d+00:00" % (seq // 60 % 60, seq % 60),
             key: clean(body)}
        if key in ("stopRequested",) and not e[key]:
            e[key] = {}
        self.events.append({k: v for k, v in e.items() if v != ""})
        self.check(status, alive, **exp)
        return self

    def check(self, status, alive, **exp):
        c = {"after": len(self.events), "status": status, "processAlive": alive}
        c.update(exp)
        self.expect[len(self.events)] = c

    def also(self, **exp):
        """More expectations at the current checkpoint."""
        self.expect[len(self.events)].update(exp)
        return self

    def doc(self):
        return {"name": self.name, "description": self.description, "events": self.events,
                "expect": [self.expect[k] for k in sorted(self.expect)]}


def U(i=0, o=0, cc=0, cr=0, cost=0.0, ctx=0, win=0, turns=0):
    return {"inputTokens": i, "outputTokens": o, "cacheCreationInputTokens": cc,
            "cacheReadInputTokens": cr, "costUsd": cost, "contextTokens": ctx,
            "contextWindow": win, "turns": turns}


def A(kind, tool=None):
    return {"kind": kind, "toolName": tool}


def T(tid, status, **kw):
    d = {"taskId": tid, "status": status}
    d.update(kw)
    return d


def S(model=None, mode=None, thinking=None):
    return {"model": model, "permissionMode": mode, "maxThinkingTokens": thinking}


EMPTY = dict(settings=S(), usage=U(), activity=A("idle"), backgroundTasks=[], hasRunningBackgroundTasks=False,
             pendingPermissions=[], scheduledWakeup=None, pendingMessages=[], planOutcomes=[],
             resumeId=None, runId=None, headSeq=0, turnInProgress=False)


def boot(v, prompt="hello", resume="cli-sess-1", adapter="interactive"):
    """run_start with a prompt, its input_sent, the CLI's run_ready."""
    v.ev(run_start(prompt, adapter=adapter), ST, True, activity=A("starting"))
    v.ev(inp(prompt, "INITIAL"), ST, True, pendingMessages=[])
    v.ev(run_ready(resume), SR, True, activity=A("thinking"), resumeId=resume)


def simple_turn(v, reply="Hello from fake model.", u=(12, 7, 0, 0), cost=0.000141):
    v.ev(content(text(reply)), SR, True, activity=A("writing"))
    v.ev(turn_end(u=u, cost=cost, res=reply), I, True, activity=A("idle"))


# ---- scenarios --------------------------------------------------------------

v = V("cold_start", "An empty log: idle, no process, nothing derived.")
v.also(**EMPTY)

v = V("one_shot_run", "One-shot adapter: prompt as argv, one turn, the process exits 0 on its own.")
boot(v, "say hi", adapter="cli")
v.also(runId="run-1")
v.ev(content(text("Hello from fake model."), u=(12, 1, 0, 0)), SR, True, activity=A("writing"),
     usage=U(ctx=13))
v.ev(turn_end(res="Hello from fake model."), I, True, activity=A("idle"),
     usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 1))
v.ev(run_end("COMPLETED", exit_code=0), I, False, usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 1),
     activity=A("idle"), resumeId="cli-sess-1", runId="run-1", headSeq=6, turnInProgress=False,
     pendingPermissions=[], backgroundTasks=[], hasRunningBackgroundTasks=False)

v = V("keep_alive_idle_between_turns", "Interactive run: after the turn the process stays alive and idle.")
boot(v)
v.also(turnInProgress=True)
simple_turn(v)
v.also(turnInProgress=False, usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 1), runId="run-1")

v = V("follow_up_same_process", "A second message to the live process streams at once (the CLI already spoke in this run); usage sums both turns.")
boot(v)
simple_turn(v)
v.ev(inp("and again"), SR, True, activity=A("thinking"), pendingMessages=[])
v.ev(content(text("Again."), u=(30, 2, 5, 7)), SR, True, activity=A("writing"), usage=U(12, 7, 0, 0, 0.000141, 44, 200000, 1))
v.ev(turn_end(u=(30, 9, 5, 7), cost=0.0003, res="Again."), I, True,
     usage=U(42, 16, 5, 7, 0.000441, 44, 200000, 2), activity=A("idle"))

v = V("start_empty_prompt_then_send", "Start with an empty prompt: idle but alive with no run_ready; the first Send makes it starting until the CLI's init.")
v.ev(run_start(""), I, True, activity=A("idle"), runId="run-1", resumeId=None, turnInProgress=False)
v.ev(inp("first message"), ST, True, activity=A("starting"), pendingMessages=[], turnInProgress=True)
v.ev(run_ready("cli-a"), SR, True, activity=A("thinking"), resumeId="cli-a")
simple_turn(v)
v.also(turns=[[None, None, 1], [2, 5, 4]])

v = V("run_start_without_input_event", "A run_start carrying a prompt is a pending input even when no input_sent is recorded.")
v.ev(run_start("do it"), ST, True, activity=A("starting"))
v.ev(run_ready("cli-b"), SR, True, activity=A("thinking"))
simple_turn(v)
v.ev(run_end("COMPLETED", exit_code=0), I, False)

v = V("first_cli_output_without_run_ready", "Any CLI output ends start-up, even before run_ready is recorded.")
v.ev(run_start("go"), ST, True)
v.ev(inp("go", "INITIAL"), ST, True)
v.ev(content(thinking("hmm")), SR, True, activity=A("thinking"))
v.ev(content(text("done")), SR, True, activity=A("writing"))
v.ev(turn_end(), I, True)

v = V("unreadable_event_changes_nothing", "A stored event the server cannot decode is served as `unreadable` at its seq: derive passes over it, before the CLI spoke, mid-turn and after the turn (status, activity, usage, pending permissions stay).")
v.ev(run_start("go"), ST, True)
v.ev(inp("go", "INITIAL"), ST, True)
v.ev(unreadable(812), ST, True, activity=A("starting"), turnInProgress=True)
v.ev(run_ready("cli-u"), SR, True, activity=A("thinking"), resumeId="cli-u")
v.ev(content(tool_use("toolu_u1", "Bash", {"command": "ls"})), SR, True, activity=A("running_tool", "Bash"))
v.ev(perm_req("req-u1", "Bash", {"command": "ls"}, "toolu_u1"), SR, True,
     activity=A("waiting_for_permission", "Bash"), pendingPermissions=["req-u1"])
v.ev(unreadable(4096), SR, True, activity=A("waiting_for_permission", "Bash"), pendingPermissions=["req-u1"])
v.ev(perm_res("req-u1", True), SR, True, activity=A("running_tool", "Bash"), pendingPermissions=[])
v.ev(turn_end(), I, True, activity=A("idle"), usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 1))
v.ev(unreadable(100), I, True, activity=A("idle"), usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 1), headSeq=10)

v = V("stop_during_startup_process_dies", "Stop before the CLI announced itself; the signal ladder ends the process.")
v.ev(run_start("hello"), ST, True)
v.ev(inp("hello", "INITIAL"), ST, True)
v.ev(stop(), SP, True, activity=A("stopping"))
v.ev(run_end("STOPPED", signal="SIGINT"), I, False, activity=A("idle"), turnInProgress=False)

v = V("stop_during_startup_cli_answers", "Stop during start-up; the CLI boots, reports the aborted turn and stays alive.")
v.ev(run_start("hello"), ST, True)
v.ev(inp("hello", "INITIAL"), ST, True)
v.ev(stop(), SP, True, activity=A("stopping"))
v.ev(run_ready("cli-c"), SP, True, activity=A("stopping"))
v.ev(result(text_="[Request interrupted by user]"), SP, True)
v.ev(turn_end(u=(0, 0, 0, 0), cost=0.0, is_error=True, reason="aborted_streaming",
              subtype="error_during_execution", num_turns=0,
              errors=["[ede_diagnostic] result_type=user"]), I, True,
     activity=A("idle"), usage=U(0, 0, 0, 0, 0.0, 0, 200000, 1))

v = V("stop_mid_turn_process_survives", "interrupt_streaming: interrupt while text streams; the turn ends aborted and the process stays for a follow-up.")
boot(v)
v.ev(content(text("tick 0 tick 1")), SR, True, activity=A("writing"))
v.ev(stop(), SP, True, activity=A("stopping"))
v.ev(content(text("tick 0 tick 1 tick 2")), SP, True, activity=A("stopping"))
v.ev(result(text_="[Request interrupted by user]"), SP, True)
v.ev(turn_end(u=(12, 1, 0, 0), cost=0.0001, is_error=True, reason="aborted_streaming",
              subtype="error_during_execution", errors=["[ede_diagnostic] result_type=user"]),
     I, True, activity=A("idle"))
v.ev(inp("next"), SR, True, activity=A("thinking"))
v.ev(content(text("ok")), SR, True)
v.ev(turn_end(), I, True, usage=U(24, 8, 0, 0, 0.000241, 13, 200000, 2))

v = V("stop_mid_turn_process_dies", "Stop mid-turn where the ladder had to end the process: stopping until run_end.")
boot(v)
v.ev(content(text("working")), SR, True)
v.ev(stop(), SP, True)
v.ev(stop(), SP, True)
v.ev(run_end("STOPPED", signal="SIGKILL"), I, False, activity=A("idle"))

v = V("stop_mid_tool", "interrupt_tool: interrupt while Bash runs; rejected tool_result, interrupt marker, aborted_tools turn_end.")
boot(v)
v.ev(content(tool_use("toolu_1", "Bash", {"command": "sleep 20", "description": "Sleep"})), SR, True,
     activity=A("running_tool", "Bash"))
v.ev(stop(), SP, True, activity=A("stopping"))
v.ev(result(("toolu_1", "The user doesn't want to proceed with this tool use.", True),
            tur="User rejected tool use"), SP, True)
v.ev(result(text_="[Request interrupted by user for tool use]"), SP, True)
v.ev(turn_end(is_error=True, reason="aborted_tools", subtype="error_during_execution"), I, True,
     activity=A("idle"))

v = V("stop_while_idle_no_effect", "A stop while idle changes nothing; the next turn streams, not stops.")
boot(v)
simple_turn(v)
v.ev(stop(), I, True, activity=A("idle"))
v.ev(inp("go on"), SR, True, activity=A("thinking"))
simple_turn(v)

v = V("stop_with_no_process_no_effect", "A stop after the process ended changes nothing.")
boot(v)
simple_turn(v)
v.ev(run_end("COMPLETED", exit_code=0), I, False)
v.ev(stop(), I, False, activity=A("idle"))

v = V("cli_crash_mid_turn", "The CLI dies mid-tool: run_end PROCESS_EXIT; its pending permission and running task go with it.")
boot(v)
v.ev(content(tool_use("toolu_w", "Write", {"file_path": "/srv/demo/work/a.txt", "content": "x"})), SR, True)
v.ev(perm_req("req-1", "Write", {"file_path": "/srv/demo/work/a.txt", "content": "x"}, "toolu_w"), SR, True,
     pendingPermissions=["req-1"], activity=A("waiting_for_permission", "Write"))
v.ev(run_end("PROCESS_EXIT", exit_code=1, stderr="Segmentation fault"), I, False,
     pendingPermissions=[], activity=A("idle"))

v = V("server_restart_recovery", "The server died mid-turn; recovery appends an inferred SERVER_RESTART run_end.")
boot(v)
v.ev(content(thinking("let me think")), SR, True, activity=A("thinking"))
v.ev(run_end("SERVER_RESTART", inferred=True, source="recovery"), I, False, activity=A("idle"),
     resumeId="cli-sess-1", runId="run-1")

v = V("idle_timeout", "A keep-alive process idle past --idle-timeout: the idle stop changes nothing, the run_end kills it.")
boot(v)
simple_turn(v)
v.ev(stop("idle"), I, True)
v.ev(run_end("IDLE_TIMEOUT", signal="SIGTERM"), I, False)

v = V("send_respawns_with_resume", "Send after the process ended: a new run resumes the CLI session; the resume id follows the latest run_ready.")
boot(v, resume="cli-1")
simple_turn(v)
v.ev(run_end("COMPLETED", exit_code=0), I, False, resumeId="cli-1", runId="run-1")
v.ev(run_start("follow up", trigger="send", resume="cli-1"), ST, True, runId="run-2", resumeId="cli-1")
v.ev(inp("follow up", "INITIAL"), ST, True)
v.ev(run_ready("cli-2"), SR, True, resumeId="cli-2", runId="run-2")
simple_turn(v)
v.also(usage=U(24, 14, 0, 0, 0.000282, 13, 200000, 2))

v = V("resume_failed_context_lost", "The CLI lost the conversation (its transcript is gone): the resumed run fails "
      "before it boots (run_error resume_failed, the CLI's error result, exit 1). The resume id is dropped, so the "
      "next run starts a new conversation (run_start lost_resume_id, no resume); context_lost keeps the point of loss.")
boot(v, resume="cli-1")
simple_turn(v)
v.ev(run_end("COMPLETED", exit_code=0), I, False, resumeId="cli-1", contextLost=None)
v.ev(run_start("follow up", trigger="send", resume="cli-1"), ST, True, runId="run-2", resumeId="cli-1")
v.ev(inp("follow up", "INITIAL"), ST, True)
v.ev(run_error("No conversation found with session ID: cli-1", "resume_failed", resume_id="cli-1"), ST, True,
     resumeId=None, contextLost={"resumeId": "cli-1", "seq": 9}, activity=A("starting"))
v.ev(turn_end(u=(0, 0, 0, 0), cost=0.0, is_error=True, reason="", subtype="error_during_execution",
              num_turns=0, models=[], errors=["No conversation found with session ID: cli-1"]), I, True,
     resumeId=None, turnInProgress=False)
v.ev(run_end("ERROR", exit_code=1, stderr="No conversation found with session ID: cli-1\n"), I, False,
     resumeId=None, contextLost={"resumeId": "cli-1", "seq": 9}, runId="run-2")
v.ev(run_start("start again", trigger="send", lost="cli-1"), ST, True, runId="run-3", resumeId=None)
v.ev(inp("start again", "INITIAL"), ST, True)
v.ev(run_ready("cli-2"), SR, True, resumeId="cli-2", contextLost={"resumeId": "cli-1", "seq": 9})
simple_turn(v)
v.also(resumeId="cli-2", contextLost={"resumeId": "cli-1", "seq": 9}, headSeq=16)

v = V("run_error_spawn_failed", "Spawn failure: run_error leaves start-up as it was; the run_end makes it idle and dead.")
v.ev(run_start("hello"), ST, True)
v.ev(inp("hello", "INITIAL"), ST, True)
v.ev(run_error("claude binary not found", "spawn_failed"), ST, True)
v.ev(run_end("ERROR", source="spawn"), I, False, activity=A("idle"), resumeId=None)

v = V("bg_bash", "bg_bash: a backgrounded Bash, the turn ends, the task completes, the CLI starts a follow-up turn (turn_start task-notification).")
boot(v, "BGBASH go")
v.ev(content(tool_use("toolu_bg", "Bash", {"command": "sleep 3; echo bg-done", "description": "Sleep then echo",
                                           "run_in_background": True})), SR, True, activity=A("running_tool", "Bash"))
v.ev(task_started("ba9wp6win", "local_bash", "Sleep then echo", "toolu_bg"), SR, True,
     backgroundTasks=[T("ba9wp6win", "running", taskType="local_bash", description="Sleep then echo", toolUseId="toolu_bg")],
     hasRunningBackgroundTasks=True)
v.ev(result(("toolu_bg", "Command running in background with ID: ba9wp6win. Output is being written to: /tmp/claude-1000/tasks/ba9wp6win.output."),
            tur={"stdout": "", "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False,
                 "backgroundTaskId": "ba9wp6win"}), SR, True, activity=A("thinking"))
v.ev(content(text("Tool step finished.")), SR, True, activity=A("writing"))
v.ev(turn_end(u=(24, 14, 0, 0), cost=0.000282, num_turns=2), I, True, activity=A("idle"),
     hasRunningBackgroundTasks=True, backgroundTasks=[T("ba9wp6win", "running")])
v.ev(task_updated("ba9wp6win", "completed"), I, True, hasRunningBackgroundTasks=False,
     backgroundTasks=[T("ba9wp6win", "completed")])
v.ev(task_note("ba9wp6win", "toolu_bg", "completed", "/tmp/claude-1000/tasks/ba9wp6win.output",
               'Background command "Sleep then echo" completed (exit code 0)'), I, True,
     hasRunningBackgroundTasks=False,
     backgroundTasks=[T("ba9wp6win", "completed", outputFile="/tmp/claude-1000/tasks/ba9wp6win.output",
                        summary='Background command "Sleep then echo" completed (exit code 0)')])
v.ev(turn_start("task-notification"), SR, True, activity=A("thinking"), turnInProgress=True)
v.ev(content(text("Background work finished.")), SR, True, activity=A("writing"))
v.ev(turn_end(u=(12, 7, 0, 0), cost=0.000141, origin="task-notification"), I, True,
     usage=U(36, 21, 0, 0, 0.000423, 13, 200000, 2), activity=A("idle"))
v.also(turns=[[1, 8, 8], [None, None, 2], [11, 13, 3]], subagentChildren={})

v = V("bg_bash_killed", "A background Bash killed with TaskStop: task_updated killed maps to stopped; the notification does not change it.")
boot(v)
v.ev(content(tool_use("toolu_bg", "Bash", {"command": "sleep 100", "run_in_background": True})), SR, True)
v.ev(task_started("bkill0001", "local_bash", "Sleep long", "toolu_bg"), SR, True)
v.ev(result(("toolu_bg", "Command running in background with ID: bkill0001.")), SR, True)
v.ev(content(tool_use("toolu_stop", "TaskStop", {"task_id": "bkill0001"})), SR, True, activity=A("running_tool", "TaskStop"))
v.ev(task_updated("bkill0001", "killed"), SR, True, backgroundTasks=[T("bkill0001", "stopped")],
     hasRunningBackgroundTasks=False)
v.ev(task_note("bkill0001", "toolu_bg", "stopped", summary="Background command \"Sleep long\" was stopped"), SR, True,
     backgroundTasks=[T("bkill0001", "stopped")])
v.ev(result(("toolu_stop", "Task stopped")), SR, True, activity=A("thinking"))
simple_turn(v)

v = V("bg_bash_failed", "A background Bash that exits non-zero: task_notification failed.")
boot(v)
v.ev(content(tool_use("toolu_bg", "Bash", {"command": "exit 3", "run_in_background": True})), SR, True)
v.ev(task_started("bfail0001", "local_bash", "Fail", "toolu_bg"), SR, True)
v.ev(result(("toolu_bg", "Command running in background with ID: bfail0001.")), SR, True)
simple_turn(v)
v.also(hasRunningBackgroundTasks=True)
v.ev(task_note("bfail0001", "toolu_bg", "failed", "/tmp/t/bfail0001.output", "Background command \"Fail\" failed (exit code 3)"),
     I, True, backgroundTasks=[T("bfail0001", "failed", outputFile="/tmp/t/bfail0001.output")], hasRunningBackgroundTasks=False)
v.ev(turn_start("task-notification"), SR, True)
simple_turn(v)

v = V("bg_task_update_progress", "task_updated progress frames (no status) keep the task running and fill in summary and counters.")
boot(v)
v.ev(content(tool_use("toolu_a", "Agent", {"description": "Look around", "prompt": "list files", "run_in_background": True})), SR, True)
v.ev(task_started("a1234567890abcdef", "local_agent", "Look around", "toolu_a", "general-purpose", "list files"), SR, True)
v.ev(task_updated("a1234567890abcdef", summary="Reading files", last_tool="Read", tokens=1200, tool_uses=2), SR, True,
     backgroundTasks=[T("a1234567890abcdef", "running", summary="Reading files", lastToolName="Read", totalTokens=1200, toolUses=2)],
     hasRunningBackgroundTasks=True)
v.ev(task_updated("a1234567890abcdef", status="running"), SR, True, hasRunningBackgroundTasks=True,
     backgroundTasks=[T("a1234567890abcdef", "running", summary="Reading files")])

v = V("task_terminal_first_wins", "The first terminal status wins: completed via task_updated, then a stray running update and a failed notification do not change it.")
boot(v)
v.ev(task_started("b1", "local_bash", "x", "toolu_x"), SR, True)
v.ev(task_updated("b1", "completed"), SR, True, backgroundTasks=[T("b1", "completed")])
v.ev(task_updated("b1", "running"), SR, True, backgroundTasks=[T("b1", "completed")], hasRunningBackgroundTasks=False)
v.ev(task_note("b1", "toolu_x", "failed", summary="late"), SR, True, backgroundTasks=[T("b1", "completed", summary="late")])

v = V("task_without_started", "A log paged from the middle: task frames for a task never started still create it.")
v.ev(task_updated("bzzz", summary="half way"), I, False, backgroundTasks=[T("bzzz", "running", taskType="")],
     hasRunningBackgroundTasks=True)
v.ev(task_note("byyy", "toolu_y", "completed"), I, False,
     backgroundTasks=[T("bzzz", "running"), T("byyy", "completed")], hasRunningBackgroundTasks=True)

v = V("bg_task_stopped_by_run_end", "A task still running when the process ends is stopped with it.")
boot(v)
v.ev(content(tool_use("toolu_bg", "Bash", {"command": "sleep 100", "run_in_background": True})), SR, True)
v.ev(task_started("blong", "local_bash", "Sleep long", "toolu_bg"), SR, True)
v.ev(result(("toolu_bg", "Command running in background with ID: blong.")), SR, True)
simple_turn(v)
v.also(hasRunningBackgroundTasks=True)
v.ev(run_end("COMPLETED", exit_code=0), I, False, backgroundTasks=[T("blong", "stopped")], hasRunningBackgroundTasks=False)

v = V("foreground_bash_registered_as_task", "mid_turn_user: a slow foreground Bash is registered as a task (task_started, task_notification completed) before its tool_result; a message sent meanwhile is queued until the next content.")
boot(v, "SLOWBASH now")
v.ev(content(tool_use("toolu_fg", "Bash", {"command": "sleep 20", "description": "Sleep 20s"})), SR, True,
     activity=A("running_tool", "Bash"))
v.ev(inp("TEXT steer message"), SR, True, pendingMessages=["TEXT steer message"], activity=A("running_tool", "Bash"))
v.ev(task_started("b52hikunz", "local_bash", "Sleep 20s", "toolu_fg"), SR, True, hasRunningBackgroundTasks=True,
     pendingMessages=["TEXT steer message"])
v.ev(task_note("b52hikunz", "toolu_fg", "completed", "", "Sleep 20s"), SR, True,
     backgroundTasks=[T("b52hikunz", "completed", summary="Sleep 20s")], hasRunningBackgroundTasks=False,
     activity=A("running_tool", "Bash"))
v.ev(result(("toolu_fg", "(Bash completed with no output)"),
            tur={"stdout": "", "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}),
     SR, True, activity=A("thinking"), pendingMessages=["TEXT steer message"])
v.ev(content(text("Tool step finished.")), SR, True, pendingMessages=[], activity=A("writing"))
v.ev(turn_end(u=(24, 14, 0, 0), cost=0.000282, num_turns=2), I, True, backgroundTasks=[T("b52hikunz", "completed")])

v = V("message_queued_while_streaming", "A Send while a turn streams is folded into the turn: still streaming, listed as pending until the next main-thread content.")
boot(v)
v.ev(content(thinking("planning")), SR, True)
v.ev(inp("also do X"), SR, True, pendingMessages=["also do X"], activity=A("thinking"))
v.ev(inp("and Y"), SR, True, pendingMessages=["also do X", "and Y"])
v.ev(content(text("Doing X and Y")), SR, True, pendingMessages=[], activity=A("writing"))
v.ev(turn_end(), I, True, pendingMessages=[])

v = V("message_queued_turn_ends", "A queued message the turn never took up stops being pending when the turn ends.")
boot(v)
v.ev(content(text("almost done")), SR, True)
v.ev(inp("late note"), SR, True, pendingMessages=["late note"])
v.ev(turn_end(), I, True, pendingMessages=[])

v = V("message_while_starting", "A Send during start-up is queued behind the first input; subagent content does not take it up, main-thread content does.")
v.ev(run_start("first"), ST, True)
v.ev(inp("first", "INITIAL"), ST, True, pendingMessages=[])
v.ev(inp("second"), ST, True, pendingMessages=["second"], activity=A("starting"))
v.ev(run_ready("cli-q"), SR, True, pendingMessages=["second"])
v.ev(content(text("sub"), parent="toolu_none"), SR, True, pendingMessages=["second"], activity=A("thinking"))
v.ev(content(text("main")), SR, True, pendingMessages=[])
v.ev(turn_end(), I, True)

v = V("input_while_stopping_keeps_stopping", "Input sent while a stop is under way is folded in; the turn still ends as stopping then idle.")
boot(v)
v.ev(content(text("x")), SR, True)
v.ev(stop(), SP, True)
v.ev(inp("wait, also"), SP, True, pendingMessages=["wait, also"])
v.ev(turn_end(is_error=True, reason="aborted_streaming", subtype="error_during_execution"), I, True, pendingMessages=[])

v = V("subagent_foreground", "subagent: an Agent tool_use runs a subagent whose frames carry parent_tool_use_id; activity stays 'Running Agent'; subagent calls do not move the context fill.")
boot(v, "SUBAGENT go")
v.ev(content(tool_use("toolu_ag", "Agent", {"description": "Inspect", "prompt": "look", "subagent_type": "general-purpose"}),
             u=(100, 5, 0, 0)), SR, True, activity=A("running_tool", "Agent"), usage=U(ctx=105))
v.ev(task_started("a0123456789abcdef", "local_agent", "Inspect", "toolu_ag", "general-purpose", "look"), SR, True,
     hasRunningBackgroundTasks=True)
v.ev(result(text_="look", parent="toolu_ag"), SR, True, activity=A("running_tool", "Agent"))
v.ev(content(tool_use("toolu_sub1", "Bash", {"command": "ls"}), parent="toolu_ag", u=(500, 9, 0, 0)), SR, True,
     activity=A("running_tool", "Agent"), usage=U(ctx=105))
v.ev(result(("toolu_sub1", "a.txt"), parent="toolu_ag"), SR, True, activity=A("running_tool", "Agent"))
v.ev(content(text("Found a.txt"), parent="toolu_ag"), SR, True, activity=A("running_tool", "Agent"))
v.ev(task_updated("a0123456789abcdef", "completed"), SR, True, hasRunningBackgroundTasks=False)
v.ev(task_note("a0123456789abcdef", "toolu_ag", "completed", "", "Inspect"), SR, True)
v.ev(result(("toolu_ag", "Found a.txt"), tur={"status": "completed", "agentId": "a0123456789abcdef"}), SR, True,
     activity=A("thinking"))
v.ev(content(text("The subagent found a.txt"), u=(120, 8, 0, 0)), SR, True, activity=A("writing"), usage=U(ctx=128))
v.ev(turn_end(u=(220, 13, 0, 0), cost=0.0009, num_turns=2), I, True, usage=U(220, 13, 0, 0, 0.0009, 128, 200000, 1))
v.also(turns=[[1, 14, 14]], subagentChildren={"toolu_ag": [6, 7, 8, 9]})

v = V("subagent_background", "bg_agent: a background agent keeps working after the spawning turn ended; its frames do not make the session stream; its notification's follow-up turn does.")
boot(v)
v.ev(content(tool_use("toolu_bga", "Agent", {"description": "Slow work", "prompt": "work", "run_in_background": True})), SR, True)
v.ev(task_started("afedcba9876543210", "local_agent", "Slow work", "toolu_bga", "general-purpose", "work"), SR, True)
v.ev(result(("toolu_bga", "Async agent launched successfully."), tur={"isAsync": True, "status": "async_launched"}), SR, True,
     activity=A("thinking"))
simple_turn(v)
v.ev(content(tool_use("toolu_s", "Read", {"file_path": "/srv/demo/work/a.txt"}), parent="toolu_bga"), I, True, activity=A("idle"))
v.ev(result(("toolu_s", "contents"), parent="toolu_bga"), I, True, hasRunningBackgroundTasks=True)
v.ev(task_updated("afedcba9876543210", "completed"), I, True, hasRunningBackgroundTasks=False)
v.ev(task_note("afedcba9876543210", "toolu_bga", "completed", "/tmp/t/afedcba9876543210.output", 'Agent "Slow work" finished'), I, True)
v.ev(turn_start("task-notification"), SR, True, activity=A("thinking"))
simple_turn(v)
v.also(turns=[[1, 8, 8], [None, None, 4], [13, 15, 3]], subagentChildren={"toolu_bga": [9, 10]})

v = V("permission_allowed", "can_use_tool_allow: a Write waits for permission, the user allows it, the tool runs.")
boot(v)
inp_w = {"file_path": "/srv/demo/work/out.txt", "content": "hi"}
v.ev(content(tool_use("toolu_w", "Write", inp_w)), SR, True, activity=A("running_tool", "Write"))
v.ev(perm_req("req-a", "Write", inp_w, "toolu_w"), SR, True, pendingPermissions=["req-a"],
     activity=A("waiting_for_permission", "Write"))
v.ev(perm_res("req-a", True, updated=inp_w), SR, True, pendingPermissions=[], activity=A("running_tool", "Write"))
v.ev(result(("toolu_w", "File created successfully at: /srv/demo/work/out.txt")), SR, True, activity=A("thinking"))
simple_turn(v)

v = V("permission_denied", "can_use_tool_deny: the user denies; the tool_result is an error and the turn goes on.")
boot(v)
v.ev(content(tool_use("toolu_b", "Bash", {"command": "rm -rf /tmp/x"})), SR, True)
v.ev(perm_req("req-d", "Bash", {"command": "rm -rf /tmp/x"}, "toolu_b"), SR, True, pendingPermissions=["req-d"],
     activity=A("waiting_for_permission", "Bash"))
v.ev(perm_res("req-d", False, message="Not allowed"), SR, True, pendingPermissions=[], activity=A("running_tool", "Bash"))
v.ev(result(("toolu_b", "Not allowed", True), tur="Error: Not allowed"), SR, True, activity=A("thinking"))
simple_turn(v)

v = V("permission_timeout", "Nobody answers: the server's permission timeout resolves it as a deny.")
boot(v)
v.ev(content(tool_use("toolu_e", "Edit", {"file_path": "a", "old_string": "x", "new_string": "y"})), SR, True)
v.ev(perm_req("req-t", "Edit", {"file_path": "a"}, "toolu_e"), SR, True, pendingPermissions=["req-t"])
v.ev(perm_res("req-t", False, by="timeout", message="Permission request timed out"), SR, True, pendingPermissions=[])
v.ev(result(("toolu_e", "Permission request timed out", True)), SR, True)
simple_turn(v)

v = V("permission_sequence", "Two requests pending at once, answered out of order; the activity names the newest pending one.")
boot(v)
v.ev(content(tool_use("toolu_1", "Write", {"file_path": "a"})), SR, True)
v.ev(content(tool_use("toolu_2", "Bash", {"command": "ls"})), SR, True)
v.ev(perm_req("req-1", "Write", {"file_path": "a"}, "toolu_1"), SR, True, pendingPermissions=["req-1"])
v.ev(perm_req("req-2", "Bash", {"command": "ls"}, "toolu_2"), SR, True, pendingPermissions=["req-1", "req-2"],
     activity=A("waiting_for_permission", "Bash"))
v.ev(perm_res("req-2", True), SR, True, pendingPermissions=["req-1"], activity=A("waiting_for_permission", "Write"))
v.ev(perm_res("req-1", True), SR, True, pendingPermissions=[], activity=A("running_tool", "Bash"))
v.ev(perm_res("req-unknown", True), SR, True, pendingPermissions=[])

v = V("permission_cancelled_by_interrupt", "interrupt_pending_permission: stop while a permission is pending; the CLI withdraws it (resolved by cancelled).")
boot(v)
v.ev(content(tool_use("toolu_b", "Bash", {"command": "git push"})), SR, True)
v.ev(perm_req("req-c", "Bash", {"command": "git push"}, "toolu_b"), SR, True, pendingPermissions=["req-c"])
v.ev(stop(), SP, True, pendingPermissions=["req-c"], activity=A("stopping"))
v.ev(perm_res("req-c", False, by="cancelled"), SP, True, pendingPermissions=[])
v.ev(result(("toolu_b", "The user doesn't want to proceed with this tool use.", True)), SP, True)
v.ev(turn_end(is_error=True, reason="aborted_tools", subtype="error_during_execution"), I, True, activity=A("idle"))

v = V("permission_cleared_by_run_end", "A permission pending when the process ends is no longer pending.")
boot(v)
v.ev(content(tool_use("toolu_b", "Bash", {"command": "ls"})), SR, True)
v.ev(perm_req("req-x", "Bash", {"command": "ls"}, "toolu_b"), SR, True, pendingPermissions=["req-x"])
v.ev(stop(), SP, True, pendingPermissions=["req-x"])
v.ev(run_end("STOPPED", signal="SIGTERM"), I, False, pendingPermissions=[])

v = V("compaction_manual", "compact: /compact marks a compaction boundary (turn_end compact) inside the turn; only the final turn_end ends it and counts.")
boot(v)
simple_turn(v)
v.ev(inp("/compact"), SR, True)
v.ev(compact_boundary("manual", 19), SR, True, activity=A("thinking"), usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 1))
v.ev(result(text_="<local-command-stdout>Compacted </local-command-stdout>"), SR, True)
v.ev(turn_end(u=(0, 0, 0, 0), cost=0.0, num_turns=0, reason="", models=[]), I, True,
     usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 2))
v.also(turns=[[1, 5, 5], [6, 9, 4]])

v = V("compaction_auto_mid_turn", "An auto-compaction in the middle of a tool-using turn: still streaming across the boundary.")
boot(v)
v.ev(content(tool_use("toolu_r", "Read", {"file_path": "big.txt"}), u=(150000, 20, 0, 0)), SR, True, activity=A("running_tool", "Read"))
v.ev(result(("toolu_r", "...")), SR, True)
v.ev(compact_boundary("auto", 150020), SR, True, usage=U(0, 0, 0, 0, 0.0, 150020, 0, 0))
v.ev(content(text("Continuing after compaction"), u=(3000, 10, 0, 0)), SR, True, activity=A("writing"), usage=U(ctx=3010))
v.ev(turn_end(u=(153000, 30, 0, 0), cost=0.5, num_turns=2), I, True, usage=U(153000, 30, 0, 0, 0.5, 3010, 200000, 1))

v = V("schedule_wakeup_not_scheduled", "schedule_wakeup (CLI 2.1.197): the tool answers 'Wakeup not scheduled', scheduledFor 0: nothing scheduled.")
boot(v, "WAKEME please")
v.ev(content(tool_use("toolu_wk", "ScheduleWakeup", {"delaySeconds": 60, "reason": "test wake", "prompt": "WOKEN up"})), SR, True,
     activity=A("running_tool", "ScheduleWakeup"), scheduledWakeup=None)
v.ev(result(("toolu_wk", "Wakeup not scheduled. Either the /loop dynamic runtime gate is off or the loop reached its maximum duration."),
            tur={"scheduledFor": 0, "clampedDelaySeconds": 0, "wasClamped": False}), SR, True, scheduledWakeup=None)
simple_turn(v)

v = V("schedule_wakeup_fires", "A ScheduleWakeup that was scheduled; it is due until the harness delivers it (input_sent WAKEUP), even across run_end.")
boot(v)
v.ev(content(tool_use("toolu_wk", "ScheduleWakeup", {"delaySeconds": 120, "reason": "check build", "prompt": "check the build"})), SR, True,
     scheduledWakeup=None)
v.ev(result(("toolu_wk", "Wakeup scheduled for 2026-11-29T21:05:00Z"),
            tur={"scheduledFor": 1795986300000, "clampedDelaySeconds": 120, "wasClamped": False}), SR, True,
     scheduledWakeup={"kind": "wakeup", "toolUseId": "toolu_wk", "scheduledForMs": 1795986300000, "prompt": "check the build"})
simple_turn(v)
v.also(scheduledWakeup={"kind": "wakeup", "toolUseId": "toolu_wk"})
v.ev(run_end("IDLE_TIMEOUT"), I, False, scheduledWakeup={"kind": "wakeup", "toolUseId": "toolu_wk"})
v.ev(run_start("check the build", trigger="send", resume="cli-sess-1"), ST, True)
v.ev(inp("check the build", "WAKEUP"), ST, True, scheduledWakeup=None, pendingMessages=[])
v.ev(run_ready("cli-sess-1"), SR, True)
simple_turn(v)

v = V("schedule_wakeup_replaced_by_failed_attempt", "The latest attempt wins: a second ScheduleWakeup that is not scheduled clears the first.")
boot(v)
v.ev(content(tool_use("toolu_1", "ScheduleWakeup", {"delaySeconds": 60, "prompt": "a"})), SR, True)
v.ev(result(("toolu_1", "ok"), tur={"scheduledFor": 1795986300000}), SR, True,
     scheduledWakeup={"kind": "wakeup", "toolUseId": "toolu_1"})
v.ev(content(tool_use("toolu_2", "ScheduleWakeup", {"delaySeconds": 99999, "prompt": "b"})), SR, True,
     scheduledWakeup={"kind": "wakeup", "toolUseId": "toolu_1"})
v.ev(result(("toolu_2", "Invalid delay", True)), SR, True, scheduledWakeup=None)

v = V("cron_create_fires", "cron_create_fire_replay: a one-shot CronCreate, then the CLI's unsolicited turn (turn_start origin cron) clears it.")
boot(v, "CRONME please")
v.ev(content(tool_use("toolu_cr", "CronCreate", {"cron": "* * * * *", "prompt": "CRONFIRED ping", "recurring": False})), SR, True,
     activity=A("running_tool", "CronCreate"))
v.ev(result(("toolu_cr", "Scheduled one-shot task 75f49f4e (Every minute). Session-only (not written to disk, dies when Claude exits). It will fire once then auto-delete."),
            tur={"id": "75f49f4e", "humanSchedule": "Every minute", "recurring": False, "durable": False}), SR, True,
     scheduledWakeup={"kind": "cron", "toolUseId": "toolu_cr", "cronId": "75f49f4e", "prompt": "CRONFIRED ping", "recurring": False})
v.ev(content(text("Tool step finished.")), SR, True)
v.ev(turn_end(u=(24, 14, 0, 0), cost=0.000282, num_turns=2), I, True, scheduledWakeup={"kind": "cron", "cronId": "75f49f4e"})
v.ev(turn_start("cron"), SR, True, scheduledWakeup=None, activity=A("thinking"))
v.ev(content(text("Scheduled prompt handled.")), SR, True)
v.ev(turn_end(), I, True, usage=U(36, 21, 0, 0, 0.000423, 13, 200000, 2))

v = V("cron_id_from_text", "CronCreate with no tool_use_result: the job id is read from the result text.")
boot(v)
v.ev(content(tool_use("toolu_cr", "CronCreate", {"cron": "0 * * * *", "prompt": "hourly", "recurring": True})), SR, True)
v.ev(result(("toolu_cr", "Scheduled recurring task ab12cd34 (Every hour). Session-only.")), SR, True,
     scheduledWakeup={"kind": "cron", "cronId": "ab12cd34", "recurring": True})

v = V("cron_recurring_survives_fire", "A recurring cron stays scheduled when it fires; a CronDelete of its id clears it.")
boot(v)
v.ev(content(tool_use("toolu_cr", "CronCreate", {"cron": "*/5 * * * *", "prompt": "poll", "recurring": True, "durable": True})), SR, True)
v.ev(result(("toolu_cr", "Scheduled recurring task 0badf00d (Every 5 minutes)."),
            tur={"id": "0badf00d", "humanSchedule": "Every 5 minutes", "recurring": True, "durable": True}), SR, True,
     scheduledWakeup={"kind": "cron", "cronId": "0badf00d", "recurring": True})
simple_turn(v)
v.ev(turn_start("cron"), SR, True, scheduledWakeup={"kind": "cron", "cronId": "0badf00d"})
v.ev(content(tool_use("toolu_del", "CronDelete", {"id": "0badf00d"})), SR, True, scheduledWakeup={"kind": "cron", "cronId": "0badf00d"})
v.ev(result(("toolu_del", "Deleted task 0badf00d")), SR, True, scheduledWakeup=None)
simple_turn(v)

v = V("cron_session_only_dies_with_process", "A non-durable cron lives in the CLI process: run_end clears it.")
boot(v)
v.ev(content(tool_use("toolu_cr", "CronCreate", {"cron": "* * * * *", "prompt": "p"})), SR, True)
v.ev(result(("toolu_cr", "Scheduled one-shot task 11aa22bb (Every minute)."),
            tur={"id": "11aa22bb", "recurring": False, "durable": False}), SR, True,
     scheduledWakeup={"kind": "cron", "cronId": "11aa22bb"})
simple_turn(v)
v.ev(run_end("COMPLETED", exit_code=0), I, False, scheduledWakeup=None)

v = V("api_error_turn", "api_error_529_retry: the API fails; a synthetic assistant line (zero usage) and a success/is_error turn_end; idle after, context fill unchanged.")
boot(v)
simple_turn(v)
v.ev(inp("again"), SR, True)
v.ev(content(text("API Error: 529 Overloaded"), u=(0, 0, 0, 0), model="<synthetic>", error="server_error"), SR, True,
     activity=A("writing"), usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 1))
v.ev(turn_end(u=(0, 0, 0, 0), cost=0.0, is_error=True, res="API Error: 529 Overloaded", api_status=529,
              reason="api_error", models=[]), I, True,
     usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 2), activity=A("idle"))

v = V("max_turns_error", "max_turns: error_max_turns ends the turn like any other.")
boot(v)
v.ev(content(tool_use("toolu_1", "Bash", {"command": "ls"})), SR, True)
v.ev(result(("toolu_1", "a")), SR, True)
v.ev(turn_end(is_error=True, subtype="error_max_turns", reason="max_turns", errors=["Reached maximum number of turns (1)"]),
     I, True, activity=A("idle"), usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 1))

v = V("plan_approved", "ExitPlanMode asks for permission; the user allows it: approved.")
boot(v)
v.ev(content(tool_use("toolu_plan", "ExitPlanMode", {"plan": "1. edit\n2. test"})), SR, True,
     planOutcomes=[{"toolUseId": "toolu_plan", "decision": "pending", "plan": "1. edit\n2. test"}])
v.ev(perm_req("req-p", "ExitPlanMode", {"plan": "1. edit\n2. test"}, "toolu_plan"), SR, True,
     activity=A("waiting_for_permission", "ExitPlanMode"))
v.ev(perm_res("req-p", True), SR, True, planOutcomes=[{"toolUseId": "toolu_plan", "decision": "approved"}])
v.ev(result(("toolu_plan", "User has approved your plan.")), SR, True, planOutcomes=[{"toolUseId": "toolu_plan", "decision": "approved"}])
simple_turn(v)

v = V("plan_rejected", "ExitPlanMode rejected: a denied permission, then an error tool_result; a second plan is approved by its result alone.")
boot(v)
v.ev(content(tool_use("toolu_p1", "ExitPlanMode", {"plan": "A"})), SR, True)
v.ev(perm_req("req-p1", "ExitPlanMode", {"plan": "A"}, "toolu_p1"), SR, True)
v.ev(perm_res("req-p1", False, message="Keep planning"), SR, True, planOutcomes=[{"toolUseId": "toolu_p1", "decision": "rejected"}])
v.ev(result(("toolu_p1", "Keep planning", True)), SR, True, planOutcomes=[{"toolUseId": "toolu_p1", "decision": "rejected"}])
v.ev(content(tool_use("toolu_p2", "ExitPlanMode", {"plan": "B"})), SR, True,
     planOutcomes=[{"toolUseId": "toolu_p1", "decision": "rejected"}, {"toolUseId": "toolu_p2", "decision": "pending"}])
v.ev(result(("toolu_p2", "User has approved your plan.")), SR, True,
     planOutcomes=[{"toolUseId": "toolu_p1", "decision": "rejected"}, {"toolUseId": "toolu_p2", "decision": "approved"}])

v = V("activity_thinking_writing_tool", "The activity follows the tail of the turn: thinking, text, tool, result, text.")
boot(v)
v.also(activity=A("thinking"))
v.ev(content(thinking("hmm")), SR, True, activity=A("thinking"))
v.ev(content(text("I will list files")), SR, True, activity=A("writing"))
v.ev(content(tool_use("toolu_g", "Glob", {"pattern": "*.rs"})), SR, True, activity=A("running_tool", "Glob"))
v.ev(result(("toolu_g", "a.rs")), SR, True, activity=A("thinking"))
v.ev(content(text("Found a.rs")), SR, True, activity=A("writing"))
v.ev(turn_end(), I, True, activity=A("idle"))

v = V("activity_parallel_tools", "Two tools in one message; results arrive out of order; the activity names the newest tool still running.")
boot(v)
v.ev(content(tool_use("toolu_a", "Read", {"file_path": "a"}), msg="msg_par"), SR, True, activity=A("running_tool", "Read"))
v.ev(content(tool_use("toolu_b", "Grep", {"pattern": "x"}), msg="msg_par"), SR, True, activity=A("running_tool", "Grep"))
v.ev(result(("toolu_b", "match")), SR, True, activity=A("running_tool", "Read"))
v.ev(result(("toolu_a", "contents")), SR, True, activity=A("thinking"))

v = V("usage_cache_and_context_window", "Cache tokens are summed; context fill counts cache reads and writes; the window is the max over the latest turn's models.")
boot(v)
v.ev(content(text("a"), u=(10, 3, 2000, 50000)), SR, True, usage=U(ctx=52013))
v.ev(turn_end(u=(10, 30, 2000, 50000), cost=0.02,
              models=[(MODEL, (10, 30, 2000, 50000), 0.019, 200000), ("claude-haiku-4-5", (5, 1, 0, 0), 0.001, 1000000)]),
     I, True, usage=U(10, 30, 2000, 50000, 0.02, 52013, 1000000, 1))
v.ev(inp("more"), SR, True)
v.ev(content(text("b"), u=(4, 6, 100, 52000)), SR, True, usage=U(10, 30, 2000, 50000, 0.02, 52110, 1000000, 1))
v.ev(turn_end(u=(4, 6, 100, 52000), cost=0.01), I, True, usage=U(14, 36, 2100, 102000, 0.03, 52110, 200000, 2))

v = V("usage_across_runs", "Usage sums every turn of every run in the log.")
boot(v, resume="c1")
simple_turn(v, u=(100, 10, 0, 0), cost=0.25)
v.ev(run_end("COMPLETED", exit_code=0), I, False)
v.ev(run_start("", resume="c1"), I, True, runId="run-2")
v.ev(inp("hi"), ST, True)
v.ev(run_ready("c1"), SR, True)
v.ev(content(text("x"), u=(7, 1, 0, 0)), SR, True)
v.ev(turn_end(u=(50, 5, 0, 0), cost=0.5), I, True, usage=U(150, 15, 0, 0, 0.75, 8, 200000, 2))
v.ev(run_end("STOPPED", signal="SIGINT"), I, False, usage=U(150, 15, 0, 0, 0.75, 8, 200000, 2), runId="run-2")

v = V("turn_start_without_origin", "The CLI starts a turn on its own without saying why: streaming until its turn_end.")
boot(v)
simple_turn(v)
v.ev(turn_start(""), SR, True, activity=A("thinking"), turnInProgress=True)
simple_turn(v)

v = V("turn_start_while_streaming", "A turn_start while a turn is already in progress changes nothing.")
boot(v)
v.ev(content(text("a")), SR, True)
v.ev(turn_start("task-notification"), SR, True, activity=A("writing"))
v.ev(turn_end(), I, True)

v = V("events_after_run_end_ignored", "Stray frames after run_end (no live run) neither revive the process nor start a turn.")
boot(v)
v.ev(run_end("PROCESS_EXIT", exit_code=137, signal="SIGKILL"), I, False)
v.ev(content(text("late")), I, False)
v.ev(turn_start("cron"), I, False)
v.ev(inp("hello?"), I, False, pendingMessages=[])
v.ev(turn_end(), I, False, usage=U(12, 7, 0, 0, 0.000141, 13, 200000, 1))

v = V("run_ready_again_mid_run", "A later run_ready in the same run (a changed init) keeps the state and updates the resume id.")
boot(v, resume="cli-x")
simple_turn(v)
v.ev(run_ready("cli-y"), I, True, resumeId="cli-y")
v.ev(inp("go"), SR, True)
v.ev(turn_end(), I, True)

v = V("stop_twice_then_turn_end", "Stop is idempotent: a second stop while stopping stays stopping; after the turn ends a third stop does nothing.")
boot(v)
v.ev(stop(), SP, True)
v.ev(stop(), SP, True)
v.ev(turn_end(is_error=True, reason="aborted_streaming", subtype="error_during_execution"), I, True)
v.ev(stop(), I, True)
v.ev(inp("next"), SR, True)

v = V("compact_turn_end_does_not_clear_stopping", "A compaction boundary while stopping does not end the stop; the real turn_end does.")
boot(v)
v.ev(inp("/compact"), SR, True)
v.ev(stop(), SP, True)
v.ev(compact_boundary("manual"), SP, True)
v.ev(turn_end(u=(0, 0, 0, 0), cost=0.0, num_turns=0, reason="", models=[]), I, True, usage=U(0, 0, 0, 0, 0.0, 0, 0, 1))

v = V("interactive_session_full", "A longer interactive session: start, a tool turn, idle, a follow-up, idle timeout, respawn on Send.")
boot(v, "list files", resume="s-1")
v.ev(content(thinking("use ls")), SR, True, activity=A("thinking"))
v.ev(content(tool_use("toolu_ls", "Bash", {"command": "ls"}), u=(20, 4, 0, 100)), SR, True, activity=A("running_tool", "Bash"), usage=U(ctx=124))
v.ev(result(("toolu_ls", "a.txt\nb.txt"), tur={"stdout": "a.txt\nb.txt", "stderr": "", "interrupted": False}), SR, True, activity=A("thinking"))
v.ev(content(text("Two files."), u=(30, 3, 0, 100)), SR, True, activity=A("writing"), usage=U(ctx=133))
v.ev(turn_end(u=(50, 7, 0, 200), cost=0.001, num_turns=2), I, True, usage=U(50, 7, 0, 200, 0.001, 133, 200000, 1))
v.ev(inp("thanks"), SR, True)
v.ev(content(text("You're welcome."), u=(40, 2, 0, 120)), SR, True, usage=U(50, 7, 0, 200, 0.001, 162, 200000, 1))
v.ev(turn_end(u=(40, 5, 0, 120), cost=0.0005), I, True, usage=U(90, 12, 0, 320, 0.0015, 162, 200000, 2))
v.ev(stop("idle"), I, True)
v.ev(run_end("IDLE_TIMEOUT", signal="SIGTERM"), I, False, resumeId="s-1", runId="run-1")
v.ev(run_start("one more", trigger="send", resume="s-1"), ST, True, runId="run-2", resumeId="s-1")
v.ev(inp("one more", "INITIAL"), ST, True)
v.ev(run_ready("s-1"), SR, True)
v.ev(content(text("Sure."), u=(10, 1, 0, 150)), SR, True)
v.ev(turn_end(u=(10, 3, 0, 150), cost=0.0002), I, True, usage=U(100, 15, 0, 470, 0.0017, 161, 200000, 3),
     activity=A("idle"), headSeq=18, turnInProgress=False, pendingPermissions=[], backgroundTasks=[],
     scheduledWakeup=None, planOutcomes=[], pendingMessages=[])

v = V("settings_live", "Start chooses a model and a permission mode; the CLI reports what it runs with; "
      "SetModel, SetMaxThinkingTokens and SetPermissionMode on the live process (mid-turn too) are in "
      "force at once and change neither status nor activity; the next turn's init agrees.")
v.ev(run_start("hello", model="opus", mode="plan"), ST, True, activity=A("starting"),
     settings=S("opus", "plan"))
v.ev(inp("hello", "INITIAL"), ST, True, settings=S("opus", "plan"))
v.ev(run_ready("cli-s", model="claude-opus-4-8", mode="plan"), SR, True, activity=A("thinking"),
     settings=S("claude-opus-4-8", "plan"))
v.ev(content(text("Hi.")), SR, True, activity=A("writing"))
v.ev(setting("MODEL", "haiku"), SR, True, activity=A("writing"), settings=S("haiku", "plan"))
v.ev(turn_end(res="Hi."), I, True, activity=A("idle"), settings=S("haiku", "plan"))
v.ev(setting("MAX_THINKING_TOKENS", "2048"), I, True, activity=A("idle"),
     settings=S("haiku", "plan", 2048))
v.ev(setting("PERMISSION_MODE", "default"), I, True, activity=A("idle"),
     settings=S("haiku", "default", 2048))
v.ev(setting("MAX_THINKING_TOKENS", "0"), I, True, settings=S("haiku", "default", 0))
v.ev(inp("again"), SR, True, activity=A("thinking"))
v.ev(run_ready("cli-s", model="claude-haiku-4-5", mode="default"), SR, True,
     settings=S("claude-haiku-4-5", "default", 0))
simple_turn(v)
v.also(settings=S("claude-haiku-4-5", "default", 0), turnInProgress=False)

v = V("settings_next_spawn", "With no live process a change is recorded for the next spawn (by the server, "
      "with no run id) and is in force from then on; the respawn's run_start carries it; a change back to the default clears it until "
      "the CLI reports its own.")
boot(v)
v.also(settings=S(MODEL, "default"))
simple_turn(v)
v.ev(run_end("IDLE_TIMEOUT", signal="SIGTERM"), I, False)
v.ev(setting("MODEL", "haiku", "NEXT_SPAWN"), I, False, run="", activity=A("idle"),
     settings=S("haiku", "default"))
v.ev(setting("PERMISSION_MODE", "dontAsk", "NEXT_SPAWN"), I, False, run="", settings=S("haiku", "dontAsk"))
v.ev(setting("MAX_THINKING_TOKENS", "4096", "NEXT_SPAWN"), I, False, run="",
     settings=S("haiku", "dontAsk", 4096))
v.ev(setting("MAX_THINKING_TOKENS", "", "NEXT_SPAWN"), I, False, run="", settings=S("haiku", "dontAsk"))
v.ev(setting("MODEL", "", "NEXT_SPAWN"), I, False, run="", settings=S(None, "dontAsk"))
v.ev(setting("MODEL", "sonnet", "NEXT_SPAWN"), I, False, run="", settings=S("sonnet", "dontAsk"))
v.ev(run_start("more", trigger="send", resume="cli-sess-1", model="sonnet", mode="dontAsk"), ST, True,
     activity=A("starting"), settings=S("sonnet", "dontAsk"))
v.ev(inp("more", "INITIAL"), ST, True)
v.ev(run_ready("cli-sess-1", model="claude-sonnet-4-6", mode="dontAsk"), SR, True,
     settings=S("claude-sonnet-4-6", "dontAsk"))
simple_turn(v)
v.ev(run_end("COMPLETED", exit_code=0), I, False, settings=S("claude-sonnet-4-6", "dontAsk"))


# ---- Codex logs --------------------------------------------------------------
# The agent's events are the Codex decoder's output for the real Codex 0.169.0
# transcripts (codex/*.json, checked by the decoder's tests); the harness's own
# events go around them as the manager writes them.

# ---- titles ------------------------------------------------------------------

CWD = "/srv/demo/work"

v = V("title_from_prompt", "The first non-blank line of the first prompt, whitespace collapsed, names the "
      "session; later prompts and a respawn's prompt do not; cwd is the latest run_start's; createdAt and "
      "updatedAt are the times of the first and the newest event.")
v.also(title="", cwd="", createdAt=None, updatedAt=None)
PROMPT = "\n   Fix  the\tflaky   test\nin CI, please"
v.ev(run_start(PROMPT), ST, True, title="Fix the flaky test", cwd=CWD, createdAt=at(1), updatedAt=at(1))
v.ev(inp(PROMPT, "INITIAL"), ST, True, title="Fix the flaky test", updatedAt=at(2))
v.ev(run_ready("cli-sess-1"), SR, True)
simple_turn(v)
v.ev(inp("Now the other test"), SR, True, title="Fix the flaky test", createdAt=at(1), updatedAt=at(6))
v.ev(content(text("Done.")), SR, True)
v.ev(turn_end(res="Done."), I, True)
v.ev(run_end("IDLE_TIMEOUT", signal="SIGTERM"), I, False, title="Fix the flaky test", updatedAt=at(9))
v.ev(run_start("And a third", trigger="send", resume="cli-sess-1"), ST, True, title="Fix the flaky test",
     cwd=CWD, createdAt=at(1), updatedAt=at(10))

v = V("title_from_first_send", "A Start with no prompt leaves the session untitled; a wakeup's input does not "
      "name it, nor a blank Send; the first user message with text does.")
v.ev(run_start(""), I, True, title="", cwd=CWD)
v.ev(inp("check the queue", "WAKEUP"), ST, True, title="")
v.ev(inp("  \t ", "USER"), ST, True, title="")
v.ev(inp("Review PR 12\nthe one about caching"), ST, True, title="Review PR 12")
v.ev(run_ready("cli-sess-1"), SR, True, title="Review PR 12")

v = V("title_set", "A client's SetTitle names the session over the derived title (recorded by the live run, "
      "or by the server with no run id when none lives); an empty title goes back to the derived one; a "
      "respawn keeps the chosen one.")
boot(v, "hello")
v.also(title="hello")
simple_turn(v)
v.ev(title_set("Greeting check"), I, True, title="Greeting check", activity=A("idle"), updatedAt=at(6))
v.ev(run_end("IDLE_TIMEOUT", signal="SIGTERM"), I, False, title="Greeting check")
v.ev(title_set(""), I, False, run="", title="hello")
v.ev(title_set("Renamed"), I, False, run="", title="Renamed", createdAt=at(1), updatedAt=at(9))
v.ev(run_start("more", trigger="send", resume="cli-sess-1"), ST, True, title="Renamed", cwd=CWD)
v.ev(inp("more", "INITIAL"), ST, True, title="Renamed")

v = V("title_long_prompt", "A first line longer than 80 characters is cut to 80 characters (not bytes: an "
      "emoji and accented letters count one each), trailing space dropped, and \"…\" added.")
LONG = ("\n\n\U0001F4E6 \u00dcn\u00efc\u00f6d\u00e9   release:\tbump each crate, regenerate the clients, "
        "rebuild the console and tag it afterwards\nsecond line")
boot(v, LONG)
v.also(title="\U0001F4E6 \u00dcn\u00efc\u00f6d\u00e9 release: bump each crate, regenerate the clients, "
       "rebuild the console\u2026")


def decoded(kind, name):
    """A decoder's payloads for one cassette, stored as <kind>/<name>.json, in order."""
    with open(os.path.join(HERE, kind, name + ".json")) as f:
        return [next(iter(p.items())) for p in json.load(f)["payloads"]]


def booting(adapter, agent):
    """The boot of a run of `agent` by `adapter`: run_start and input_sent, then its run_ready (p[0])."""
    def boot(v, p, prompt, trigger="start", resume=""):
        v.ev(run_start(prompt, adapter=adapter, agent=agent, trigger=trigger, resume=resume), ST, True,
             activity=A("starting"))
        v.ev(inp(prompt, "INITIAL"), ST, True)
        if p:
            v.ev(p[0], SR, True, activity=A("thinking"), resumeId=p[0][1]["resumeId"])
    return boot


def codex(name):
    """The Codex decoder's payloads for cassettes/codex/<name>.jsonl."""
    return decoded("codex", name)


codex_boot = booting("codex", "codex")


def turn_usage(p, turns, window=258400):
    """The usage after the turn_ends in p: their sums (none for a turn without a model call)."""
    tot = {"inputTokens": 0, "outputTokens": 0, "cacheCreationInputTokens": 0, "cacheReadInputTokens": 0}
    for key, body in p:
        if key == "turnEnd":
            for k in tot:
                tot[k] += int(body.get("usage", {}).get(k, "0"))
    return U(tot["inputTokens"], tot["outputTokens"], tot["cacheCreationInputTokens"],
             tot["cacheReadInputTokens"], ctx=0, win=window, turns=turns)


def call(tid, name, kind, is_error=None):
    return {"toolUseId": tid, "toolName": name, "kind": kind, "isError": is_error}


p = codex("first_turn")
v = V("codex_first_turn", "Codex: one turn on a kept-alive codex app-server (thread/start answered with the "
      "thread id as the resume id, an agentMessage, turn/completed with the turn's token usage). Codex "
      "reports a call's tokens only after its items, so no content carries usage: the context fill stays 0.")
codex_boot(v, p, "TEXT hello from codex")
v.ev(p[1], SR, True, activity=A("writing"))
v.ev(p[2], I, True, activity=A("idle"), usage=turn_usage(p, 1), turnInProgress=False,
     turns=[[1, 5, 5]])

for name, desc in [
        ("approval_accepted",
         "Codex: a shell command needs approval (approvalPolicy untrusted); the user allows it. The "
         "commandExecution is a Bash tool_use, the approval a permission request with Codex's own id; "
         "Codex's serverRequest/resolved after the answer is a withdrawal the run task drops (not pending)."),
        ("approval_declined",
         "Codex: the user declines the command; the commandExecution completes declined, an error result, "
         "and the model answers.")]:
    p = codex(name)
    tool = p[1][1]["blocks"][0]
    tid, tinput = tool["toolUseId"], tool["input"]
    allow = name == "approval_accepted"
    v = V("codex_" + name, desc)
    codex_boot(v, p, "BASH touch approved.txt && echo made-it" if allow else "BASH touch declined.txt")
    v.ev(p[1], SR, True, activity=A("running_tool", "Bash"), toolCalls=[call(tid, "Bash", "shell")])
    v.ev(p[2], SR, True, activity=A("waiting_for_permission", "Bash"), pendingPermissions=["0"])
    if allow:
        v.ev(perm_res("0", True, updated=tinput), SR, True, pendingPermissions=[],
             activity=A("running_tool", "Bash"))
    else:
        v.ev(perm_res("0", False, message="Declined"), SR, True, pendingPermissions=[],
             activity=A("running_tool", "Bash"))
    assert p[3][0] == "permissionResolved"  # the withdrawal the run task drops
    v.ev(p[4], SR, True, activity=A("thinking"),
         toolCalls=[call(tid, "Bash", "shell", not allow)])
    v.ev(p[5], SR, True, activity=A("writing"))
    v.ev(p[6], I, True, activity=A("idle"), usage=turn_usage(p, 1), pendingPermissions=[])

p = codex("interrupt")
v = V("codex_interrupt", "Codex: Stop mid-answer (turn/interrupt); Codex never completes the message it was "
      "writing, so the decoder keeps its text so far as content before the interrupted turn_end, which "
      "made no model call and has no usage; the process stays for the next turn.")
codex_boot(v, p, "SLOW 100 100")
v.ev(stop(), SP, True, activity=A("stopping"))
v.ev(p[1], SP, True, activity=A("stopping"))
v.ev(p[2], I, True, activity=A("idle"), usage=turn_usage(p[:3], 1, window=0), turnInProgress=False)
v.ev(inp("TEXT after the stop"), SR, True, activity=A("thinking"))
v.ev(p[3], SR, True, activity=A("writing"))
v.ev(p[4], I, True, activity=A("idle"), usage=turn_usage(p, 2), turns=[[1, 6, 6], [7, 9, 3]])

p = codex("interrupt_pending_approval")
tid = p[1][1]["blocks"][0]["toolUseId"]
v = V("codex_interrupt_pending_approval", "Codex: Stop while a command approval waits. Codex never completes "
      "the command: the decoder closes it with an error result before the turn_end. Codex settles the "
      "approval only after the turn (serverRequest/resolved): until then it is still pending, though idle.")
codex_boot(v, p, "BASH touch never.txt")
v.ev(p[1], SR, True, activity=A("running_tool", "Bash"))
v.ev(p[2], SR, True, activity=A("waiting_for_permission", "Bash"), pendingPermissions=["0"])
v.ev(stop(), SP, True, activity=A("stopping"), pendingPermissions=["0"])
v.ev(p[3], SP, True, activity=A("stopping"), toolCalls=[call(tid, "Bash", "shell", True)])
v.ev(p[4], I, True, activity=A("idle"), pendingPermissions=["0"], turnInProgress=False)
v.ev(p[5], I, True, activity=A("idle"), pendingPermissions=[])
v.ev(inp("TEXT next"), SR, True, activity=A("thinking"))
v.ev(p[6], SR, True, activity=A("writing"))
v.ev(p[7], I, True, activity=A("idle"), usage=turn_usage(p, 2), pendingPermissions=[])

p = codex("api_error")
v = V("codex_api_error", "Codex: the model API fails (no retry): an error turn_end with Codex's message and "
      "no usage; the next turn on the same process works.")
codex_boot(v, p, "ERROR 500")
v.ev(p[1], I, True, activity=A("idle"), usage=U(turns=1), turnInProgress=False)
v.ev(inp("TEXT recovered"), SR, True, activity=A("thinking"))
v.ev(p[2], SR, True, activity=A("writing"))
v.ev(p[3], I, True, activity=A("idle"), usage=turn_usage(p, 2))

p = codex("thinking")
v = V("codex_thinking", "Codex: a reasoning item is a thinking block, then the answer.")
codex_boot(v, p, "THINK pondered")
v.ev(p[1], SR, True, activity=A("thinking"))
v.ev(p[2], SR, True, activity=A("writing"))
v.ev(p[3], I, True, activity=A("idle"), usage=turn_usage(p, 1))

p, again = codex("resume"), codex("resume.2")
thread = p[0][1]["resumeId"]
v = V("codex_resume", "Codex: the next Send after the process ended resumes the thread in a new process "
      "(thread/resume); the same thread id is the resume id. Codex reports the thread's earlier usage "
      "again before the first turn: it is not a turn's, so the usage counts each turn once.")
codex_boot(v, p, "TEXT remember me")
v.ev(p[1], SR, True, activity=A("writing"))
v.ev(p[2], I, True, activity=A("idle"), usage=turn_usage(p, 1))
v.ev(run_end("IDLE_TIMEOUT", signal="SIGTERM"), I, False, resumeId=thread)
codex_boot(v, again, "TEXT again", trigger="send", resume=thread)
v.also(runId="run-2", resumeId=thread)
v.ev(again[1], SR, True, activity=A("writing"))
v.ev(again[2], I, True, activity=A("idle"), usage=turn_usage(p + again, 2), resumeId=thread)

p, lost = codex("lost_rollout"), codex("lost_rollout.2")
thread = p[0][1]["resumeId"]
v = V("codex_lost_rollout", "Codex: the thread's rollout file is gone; the next run's thread/resume is "
      "answered 'no rollout found': run_error resume_failed naming the thread, the resume id is dropped "
      "and the process is closed (no turn began in Codex).")
codex_boot(v, p, "TEXT soon forgotten")
v.ev(p[1], SR, True, activity=A("writing"))
v.ev(p[2], I, True, activity=A("idle"), resumeId=thread)
v.ev(run_end("IDLE_TIMEOUT", signal="SIGTERM"), I, False, resumeId=thread, contextLost=None)
codex_boot(v, [], "TEXT remember?", trigger="send", resume=thread)
v.also(runId="run-2")
v.ev(lost[0], ST, True, resumeId=None, contextLost={"resumeId": thread, "seq": 9},
     activity=A("starting"))
v.ev(run_end("COMPLETED", exit_code=0), I, False, resumeId=None,
     contextLost={"resumeId": thread, "seq": 9}, turnInProgress=False)


# ---- ACP logs ----------------------------------------------------------------
# The agent's events are the ACP decoder's output for the real Gemini CLI
# 0.60.0 ACP transcripts (acp/*.json, checked by the decoder's tests); the
# harness's own events go around them as the manager writes them.

def acp(name):
    """The ACP decoder's payloads for cassettes/gemini/<name>.jsonl."""
    return decoded("acp", name)


acp_boot = booting("acp", "gemini")  # a Gemini run over ACP


p = acp("first_turn")
v = V("acp_first_turn", "ACP (Gemini CLI): one turn on a kept-alive `gemini --acp` (session/new answered "
      "with the session id as the resume id, the agent_message_chunks as one text block, the prompt's "
      "answer end_turn with Gemini's token count). Streaming mid-turn, idle after it; Gemini reports no "
      "context window.")
acp_boot(v, p, "TEXT hello from gemini")
v.also(turnInProgress=True)
v.ev(p[1], SR, True, activity=A("writing"), turnInProgress=True)
v.ev(p[2], I, True, activity=A("idle"), usage=turn_usage(p, 1, window=0), turnInProgress=False,
     turns=[[1, 5, 5]])

p = acp("permission_allow")
tool = p[1][1]["blocks"][0]
tid, tinput = tool["toolUseId"], tool["input"]
v = V("acp_permission_allow", "ACP (Gemini CLI): a shell command needs approval. Gemini announces no "
      "tool_call first: the decoder writes the tool_use (kind execute → Bash) before the permission "
      "request, whose id is the agent request's JSON id. The user allows it; the completed "
      "tool_call_update is its result.")
acp_boot(v, p, "BASH touch approved.txt && echo made-it")
v.ev(p[1], SR, True, activity=A("running_tool", "Bash"), toolCalls=[call(tid, "Bash", "shell")])
v.ev(p[2], SR, True, activity=A("waiting_for_permission", "Bash"), pendingPermissions=["0"])
v.ev(perm_res("0", True, updated=tinput), SR, True, pendingPermissions=[],
     activity=A("running_tool", "Bash"))
v.ev(p[3], SR, True, activity=A("thinking"), toolCalls=[call(tid, "Bash", "shell", False)])
v.ev(p[4], SR, True, activity=A("writing"))
v.ev(p[5], I, True, activity=A("idle"), usage=turn_usage(p, 1, window=0), pendingPermissions=[])

p = acp("cancel")
v = V("acp_cancel", "ACP (Gemini CLI): Stop mid-answer (session/cancel); the text so far is kept as "
      "content, the prompt answers stopReason cancelled: an interrupted error turn without usage; the "
      "process takes the next prompt.")
acp_boot(v, p, "SLOW 100 100")
v.ev(p[1], SR, True, activity=A("writing"))
v.ev(stop(), SP, True, activity=A("stopping"))
v.ev(p[2], I, True, activity=A("idle"), usage=U(turns=1), turnInProgress=False)
v.ev(inp("TEXT after the stop"), SR, True, activity=A("thinking"))
v.ev(p[3], SR, True, activity=A("writing"))
v.ev(p[4], I, True, activity=A("idle"), usage=turn_usage(p, 2, window=0), turns=[[1, 6, 6], [7, 9, 3]])

p = acp("cancel_pending_permission")
tid = p[1][1]["blocks"][0]["toolUseId"]
v = V("acp_cancel_pending_permission", "ACP (Gemini CLI): Stop while a permission request waits. The "
      "process side answers the request cancelled (Gemini waits for that); at the cancelled answer the "
      "decoder withdraws the request (permission_resolved by cancelled) and closes the tool that never "
      "ran with an error result before the interrupted turn_end.")
acp_boot(v, p, "BASH touch never.txt")
v.ev(p[1], SR, True, activity=A("running_tool", "Bash"))
v.ev(p[2], SR, True, activity=A("waiting_for_permission", "Bash"), pendingPermissions=["0"])
v.ev(stop(), SP, True, activity=A("stopping"), pendingPermissions=["0"])
v.ev(p[3], SP, True, activity=A("stopping"), pendingPermissions=[])
v.ev(p[4], SP, True, activity=A("stopping"), toolCalls=[call(tid, "Bash", "shell", True)])
v.ev(p[5], I, True, activity=A("idle"), pendingPermissions=[], turnInProgress=False)
v.ev(inp("TEXT next"), SR, True, activity=A("thinking"))
v.ev(p[6], SR, True, activity=A("writing"))
v.ev(p[7], I, True, activity=A("idle"), usage=turn_usage(p, 2, window=0), pendingPermissions=[])

p, again = acp("load"), acp("load.2")
sid = p[0][1]["resumeId"]
v = V("acp_resume", "ACP (Gemini CLI): the next Send after the process ended loads the session in a new "
      "process (session/load); the decoder drops the history Gemini replays, before and after the "
      "load's answer, so only the new turn is logged, once.")
acp_boot(v, p, "TEXT remember me")
v.ev(p[1], SR, True, activity=A("writing"))
v.ev(p[2], I, True, activity=A("idle"), usage=turn_usage(p, 1, window=0))
v.ev(run_end("IDLE_TIMEOUT", signal="SIGTERM"), I, False, resumeId=sid)
acp_boot(v, again, "TEXT again", trigger="send", resume=sid)
v.also(runId="run-2", resumeId=sid)
v.ev(again[1], SR, True, activity=A("writing"))
v.ev(again[2], I, True, activity=A("idle"), usage=turn_usage(p + again, 2, window=0), resumeId=sid,
     turns=[[1, 5, 5], [None, None, 1], [7, 11, 5]])

p, lost = acp("unknown_session"), acp("unknown_session.2")
sid = p[0][1]["resumeId"]
assert lost[0][1]["resumeId"] == sid
v = V("acp_resume_failed", "ACP (Gemini CLI): Gemini no longer knows the session; the next run's "
      "session/load is answered with an error (-32603, 'Invalid session identifier'): run_error "
      "resume_failed naming the session, the resume id is dropped and the process is closed (no turn "
      "began in Gemini). The recording asked for an id Gemini never had; the decoder names the one it "
      "was spawned to load.")
acp_boot(v, p, "TEXT soon forgotten")
v.ev(p[1], SR, True, activity=A("writing"))
v.ev(p[2], I, True, activity=A("idle"), resumeId=sid)
v.ev(run_end("IDLE_TIMEOUT", signal="SIGTERM"), I, False, resumeId=sid, contextLost=None)
acp_boot(v, [], "TEXT remember?", trigger="send", resume=sid)
v.also(runId="run-2")
v.ev(lost[0], ST, True, resumeId=None, contextLost={"resumeId": sid, "seq": 9},
     activity=A("starting"))
v.ev(run_end("COMPLETED", exit_code=0), I, False, resumeId=None,
     contextLost={"resumeId": sid, "seq": 9}, turnInProgress=False)

p = acp("late_update")
v = V("acp_late_update", "ACP: a chunk that arrives after the prompt's answer (before the next prompt) "
      "belongs to the finished turn: the decoder appends it as content at once and begins no turn, so "
      "the session stays idle. (Gemini's first_turn recording with one such chunk added.)")
acp_boot(v, p, "TEXT hello from gemini")
v.ev(p[1], SR, True, activity=A("writing"))
v.ev(p[2], I, True, activity=A("idle"), turnInProgress=False)
v.ev(p[3], I, True, activity=A("idle"), turnInProgress=False, usage=turn_usage(p, 1, window=0),
     turns=[[1, 5, 5], [None, None, 1]])


def main():
    write_vectors(HERE, ALL)


if __name__ == "__main__":
    main()
