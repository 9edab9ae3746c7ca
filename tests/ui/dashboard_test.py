#!/usr/bin/python3
"""The dashboard in a real browser (Debian's headless Chromium, driven by
python3-selenium) on a real fleet: two hourglassd daemons on one
redis-server, under more load than they can serve in time.

It checks what an operator relies on: the page shows the numbers the API and
/metrics report; a dead job (dead-lettered the real way: its daemon was
killed with -9 while it ran) is replayed by clicking; a queue is paused and
resumed by clicking, and the API sees it; a hostile result and a hostile
payload are shown as text and run nothing; the page breaks no rule of its Content-Security-Policy.

Exit 77 (counted as skipped by CTest, never as passed) only when no browser
is installed; tools/install-deps installs chromium, chromium-driver and
python3-selenium.

Usage: dashboard_test.py --hourglassd PATH [--screenshots DIR]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SKIP = 77
READ_TOKEN = "r3ad-token-0123456"
ADMIN_TOKEN = "adm1n-token-0123456"
HOSTILE = '<img src=x onerror="document.title=\'pwned\'"><script>document.title=\'pwned\'</script>&amp; "quoted"'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, check, timeout=20.0, every=0.1):
    give_up = time.monotonic() + timeout
    last = None
    while time.monotonic() < give_up:
        try:
            last = check()
            if last:
                return last
        except Exception as e:  # a stale element, a refused connection: try again
            last = e
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Api:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method, path, body=None, headers=None, admin=False):
        h = {"Authorization": "Bearer " + (ADMIN_TOKEN if admin else READ_TOKEN)}
        h.update(headers or {})
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def json(self, path):
        status, body = self.call("GET", path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def submit(self, handler, body, freshness="300S", headers=None):
        status, text = self.call("POST", "/v1/jobs/" + handler, body.encode(),
                                 {"Prefer": "respond-async", "Job-Freshness": freshness, **(headers or {})})
        return status, (json.loads(text) if status == 202 else text)

    def metric_total(self, name, **labels):
        _, text = self.call("GET", "/metrics")
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total


class Fleet:
    """redis-server and hourglassd processes in a temporary folder."""

    def __init__(self, hourglassd):
        self.hourglassd = hourglassd
        self.dir = tempfile.mkdtemp(prefix="hourglass-ui-")
        self.procs = {}
        self.redis_port = free_port()
        for name, token in (("read.token", READ_TOKEN), ("admin.token", ADMIN_TOKEN)):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(token + "\n")
        self.procs["redis"] = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--dir", self.dir], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for("redis", lambda: socket.create_connection(("127.0.0.1", self.redis_port), 1).close() or True)

    def daemon(self, name, workers):
        port = free_port()
        log = open(os.path.join(self.dir, name + ".log"), "w")
        self.procs[name] = subprocess.Popen(
            [self.hourglassd, "--listen", f"127.0.0.1:{port}", "--broker", f"redis://127.0.0.1:{self.redis_port}",
             "--consumer", name, "--workers", str(workers), "--lease", "1s", "--max-deliveries", "1",
             "--auth-token-file", os.path.join(self.dir, "read.token"),
             "--admin-token-file", os.path.join(self.dir, "admin.token"), "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT)
        api = Api(port)
        wait_for(name + " up", lambda: api.call("GET", "/readyz")[0] == 200)
        return api, port

    def kill(self, name):
        self.procs.pop(name).send_signal(signal.SIGKILL)

    def close(self):
        for p in self.procs.values():
            p.terminate()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Load:
    """Async jobs of 50 ms with 1 s of freshness, faster than the fleet runs
    them: admission refuses some (504 admission), some expire waiting."""

    def __init__(self, api, threads=2):
        self.api, self.stop, self.sent = api, threading.Event(), 0
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def run(self):
        while not self.stop.is_set():
            self.api.submit("sleep", '{"ms": 50}', freshness="1S")
            self.sent += 1
            time.sleep(0.005)

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None, "python3-selenium is not installed"
    for path in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        if not os.path.exists(path):
            return None, path + " is not installed"
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000",
              "--force-color-profile=srgb"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hourglassd", required=True)
    ap.add_argument("--screenshots", default=os.environ.get("HOURGLASS_UI_SCREENSHOTS"))
    args = ap.parse_args()
    drv, why = browser()
    if drv is None:
        print("SKIPPED: no browser to drive:", why, "(tools/install-deps installs it)")
        return SKIP
    from selenium.webdriver.common.by import By

    fleet = Fleet(args.hourglassd)
    load = None
    try:
        # A job dead-lettered the real way: its only daemon killed while it ran,
        # --max-deliveries 1, reclaimed by a daemon that starts afterwards.
        a, _ = fleet.daemon("a", 1)
        _, accepted = a.submit("sleep", '{"ms": 8000}')
        dead_id = accepted["id"]
        wait_for("the job running on a", lambda: a.json("/v1/jobs/" + dead_id)["state"] == "running")
        fleet.kill("a")
        api, port = fleet.daemon("b", 2)
        fleet.daemon("c", 2)
        wait_for("the job dead", lambda: api.json("/v1/jobs/" + dead_id)["state"] == "dead", timeout=30)

        status, hostile = api.submit("echo", HOSTILE)
        assert status == 202, hostile
        wait_for("the hostile job done", lambda: api.json("/v1/jobs/" + hostile["id"])["state"] == "ok")
        # A job that keeps its hostile payload (scheduled far ahead), sent as markup.
        status, held = api.submit("echo", HOSTILE, headers={"Job-Delay": "600S", "Content-Type": "text/html"})
        assert status == 202, held

        load = Load(api)
        base = f"http://127.0.0.1:{port}/ui/"
        drv.get(base)
        wait_for("the page asking for a token",
                 lambda: "access token" in drv.find_element(By.CSS_SELECTOR, "[data-error]").text)
        # The admin token alone reads (an operator's); then the access token too.
        drv.find_element(By.CSS_SELECTOR, "#tokens summary").click()
        drv.find_element(By.ID, "admin-token").send_keys(ADMIN_TOKEN)
        drv.find_element(By.CSS_SELECTOR, "#token-form button").click()
        card = '[data-queue="default"]'
        wait_for("the queue's card, read with the admin token alone", lambda: drv.find_element(By.CSS_SELECTOR, card))
        drv.find_element(By.CSS_SELECTOR, "#tokens summary").click()
        drv.find_element(By.ID, "read-token").send_keys(READ_TOKEN)
        drv.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait_for("the queue's card", lambda: drv.find_element(By.CSS_SELECTOR, card))
        time.sleep(6)  # three polls under load: the charts over time have bars
        wait_for("expiries or refusals under overload",
                 lambda: api.metric_total("hourglass_jobs_rejected_total", reason="insufficient_budget")
                 + api.metric_total("hourglass_jobs_expired_total") > 0, timeout=30)
        shot(drv, args.screenshots, "overview-under-overload.png")

        # The dead job, listed and shown.
        drv.get(base + "#/queues/default/dead")
        row = f'[data-list="dead"] [data-job="{dead_id}"]'
        wait_for("the dead job listed", lambda: drv.find_element(By.CSS_SELECTOR, row))
        shot(drv, args.screenshots, "queue-dead-letter.png")
        drv.get(base + "#/jobs/" + dead_id)
        wait_for("the dead job's page", lambda: drv.find_element(By.CSS_SELECTOR, '[data-field="state"]').text == "dead")
        wait_for("its cause", lambda: drv.find_element(By.CSS_SELECTOR, '[data-field="cause"]').text == "max_deliveries")
        wait_for("what it was sent",
                 lambda: drv.find_element(By.CSS_SELECTOR, '[data-field="payload"]').text == '{"ms": 8000}')
        wait_for("its timeline: started on the daemon that died",
                 lambda: "on a" in drv.find_element(By.CSS_SELECTOR, '[data-event="started"]').text)
        shot(drv, args.screenshots, "dead-job.png")

        # Replay it by clicking (and confirming).
        click(drv, f'[data-action="replay:{dead_id}"]')
        click(drv, f'[data-action="replay:{dead_id}:confirm"]')
        wait_for("the replay admitted", lambda: api.json("/v1/jobs/" + dead_id)["state"] in ("queued", "running"))
        assert dead_id not in json.dumps(api.json("/v1/jobs?state=dead")), "off the dead list"

        # Pause and resume the queue by clicking; the API and every daemon see it.
        drv.get(base + "#/queues/default/queued")
        click(drv, '[data-action="pause:default"]')
        click(drv, '[data-action="pause:default:confirm"]')
        wait_for("paused in the API", lambda: api.json("/v1/queues/default")["paused"] is True)
        wait_for("paused on the page", lambda: drv.find_element(By.CSS_SELECTOR, card + ' [data-paused="true"]'))
        shot(drv, args.screenshots, "queue-paused.png")
        click(drv, '[data-action="resume:default"]')
        click(drv, '[data-action="resume:default:confirm"]')
        wait_for("resumed in the API", lambda: api.json("/v1/queues/default")["paused"] is False)

        # A hostile payload is text: nothing ran, no element was made of it.
        drv.get(base + "#/jobs/" + hostile["id"])
        wait_for("the hostile result shown as text",
                 lambda: drv.find_element(By.CSS_SELECTOR, '[data-field="result"]').text == HOSTILE)
        assert drv.title == "hourglass", "a script of the payload ran: " + drv.title
        assert not drv.find_elements(By.CSS_SELECTOR, "main img"), "the payload became an element"
        drv.get(base + "#/jobs/" + held["id"])
        wait_for("the hostile payload shown as text",
                 lambda: drv.find_element(By.CSS_SELECTOR, '[data-field="payload"]').text == HOSTILE)
        assert "text/html" in drv.find_element(By.CSS_SELECTOR, "main").text, "its content type named"
        assert drv.title == "hourglass", "a script of the payload ran: " + drv.title
        assert not drv.find_elements(By.CSS_SELECTOR, "main img, main script"), "the payload became an element"
        shot(drv, args.screenshots, "job-payload.png")

        # With the load stopped and the queue drained, the page's numbers are the API's and /metrics'.
        load.end()
        load = None
        wait_for("the queue drained", lambda: sum(api.json("/v1/queues/default")["counts"][k]
                                                  for k in ("queued", "running")) == 0, timeout=60)
        drv.get(base + "#/")
        time.sleep(2.5)  # one more poll after the drain
        q = api.json("/v1/queues/default")

        def counts_match():
            shown = {k: drv.find_element(By.CSS_SELECTOR, f'{card} [data-count="{k}"]').text
                     for k in ("queued", "running", "scheduled", "waiting", "dead")}
            want = {k: str(q["counts"][k]) for k in shown}
            return shown == want or (shown, want)
        assert wait_for("the counts of the API", lambda: counts_match() is True), counts_match()
        ok_total = int(api.metric_total("hourglass_jobs_finished_total", outcome="ok"))
        wait_for("ok jobs as /metrics counts them",
                 lambda: drv.find_element(By.CSS_SELECTOR, '[data-field="ok_total"]').text == str(ok_total))
        fleet_ok = q["totals"]["finished"]["ok"]
        wait_for("the fleet's ok jobs as the broker counts them",
                 lambda: drv.find_element(By.CSS_SELECTOR, card + ' [data-field="fleet_ok"]').text == str(fleet_ok))
        assert fleet_ok >= ok_total, (fleet_ok, ok_total)  # two daemons ran them; this one's are among them
        slots = drv.find_element(By.CSS_SELECTOR, card + ' [data-field="live_slots"]').text
        assert slots == str(q["live_slots"]), (slots, q["live_slots"])

        # A job waiting for a person: listed under "waiting" with its clocks and a
        # Cancel; the signal resumes it and it leaves the list.
        status, waiting = api.submit("approval", '{"work_ms": 0, "signal": "approve", "wait_ms": 600000}')
        assert status == 202, waiting
        waiting_id = waiting["id"]
        wait_for("the job waiting", lambda: api.json("/v1/jobs/" + waiting_id)["state"] == "waiting")
        drv.get(base + "#/queues/default/waiting")
        waiting_row = f'[data-list="waiting"] [data-job="{waiting_id}"]'
        wait_for("the waiting job listed", lambda: drv.find_element(By.CSS_SELECTOR, waiting_row))
        detail = wait_for("its wait and the person's clock",
                          lambda: (lambda t: t if "waiting for signal:approve" in t and "person " in t else None)(
                              drv.find_element(By.CSS_SELECTOR, waiting_row).text))
        assert "left" in detail, detail
        assert drv.find_elements(By.CSS_SELECTOR, f'[data-action="cancel:{waiting_id}"]'), "no Cancel on a waiting job"
        shot(drv, args.screenshots, "queue-waiting.png")
        status, text = api.call("POST", f"/v1/jobs/{waiting_id}/signals/approve", b'{"ok": true}',
                                {"Content-Type": "application/json"})  # authenticated like DELETE
        assert status == 200, (status, text)
        wait_for("the signalled job done", lambda: api.json("/v1/jobs/" + waiting_id)["state"] == "ok")
        assert waiting_id not in json.dumps(api.json("/v1/jobs?state=waiting")), "still listed waiting"
        wait_for("the waiting list empty again",
                 lambda: drv.find_element(By.CSS_SELECTOR, '[data-empty="waiting"]')
                 and not drv.find_elements(By.CSS_SELECTOR, waiting_row)
                 and not drv.find_elements(By.CSS_SELECTOR, "p.bad"))

        # Readable in a dark room: the system's dark preference turns the page dark.
        drv.execute_cdp_cmd("Emulation.setEmulatedMedia",
                            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        background = drv.execute_script("return getComputedStyle(document.body).backgroundColor")
        channels = [int(c) for c in background[background.index("(") + 1:-1].split(",")[:3]]
        assert max(channels) < 64, "dark preference, light page: " + background
        shot(drv, args.screenshots, "overview-dark.png")
        drv.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})

        # A phone's width: nothing wider than the screen, so nothing scrolls sideways.
        drv.set_window_size(390, 844)
        drv.get(base + "#/queues/default/dead")
        wait_for("the queue's page on a phone", lambda: drv.find_element(By.CSS_SELECTOR, card))
        overflow = drv.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{overflow} px wider than a phone's screen"
        shot(drv, args.screenshots, "queue-phone.png")

        # The page broke no rule of its policy and threw nothing (the 401s
        # before the token was given are the daemon's answers, not the page's faults).
        problems = [e for e in drv.get_log("browser") if (e["level"] == "SEVERE" and "status of 401" not in e["message"])
                    or "Content Security Policy" in e["message"]]
        assert not problems, problems
        print("dashboard: all checks passed")
        return 0
    finally:
        if load:
            load.end()
        drv.quit()
        fleet.close()


def click(drv, css):
    from selenium.webdriver.common.by import By
    # The page is drawn again at each poll: find the button afresh until a click lands.
    wait_for("a click on " + css, lambda: drv.find_element(By.CSS_SELECTOR, css).click() or True)


def shot(drv, folder, name):
    if folder:
        os.makedirs(folder, exist_ok=True)
        drv.save_screenshot(os.path.join(folder, name))


if __name__ == "__main__":
    sys.exit(main())
