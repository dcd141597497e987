// Debian's chromium, headless, driven with puppeteer-core and remote-controlled by the e2e tests
// (tests/e2e/test_viewer.py): one JSON command per stdin line, one JSON answer per stdout line.
//
//   {"op":"open","url":...}                 load the page; answers {"ok":true}
//   {"op":"eval","expr":"..."}              the value of the expression in the page
//   {"op":"waitFor","expr":"...","timeout":ms}   until the expression is truthy
//   {"op":"click","x":..,"y":..}            a mouse click at page coordinates
//   {"op":"clickSelector","selector":"..."} a click on an element
//   {"op":"screenshot","path":"..."}        a PNG of the page
//   {"op":"close"}
import readline from "node:readline";

import puppeteer from "puppeteer-core";

const executable = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await puppeteer.launch({
  executablePath: executable,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-features=Translate,MediaRouter", "--window-size=1200,800"],
  defaultViewport: { width: 1200, height: 800, deviceScaleFactor: 1 },
});
const page = await browser.newPage();
const consoleLines = [];
page.on("console", (message) => consoleLines.push(`${message.type()}: ${message.text()}`));
page.on("pageerror", (error) => consoleLines.push(`pageerror: ${error.message}`));

const reply = (value) => process.stdout.write(JSON.stringify(value) + "\n");

async function run(command) {
  switch (command.op) {
    case "open": {
      const response = await page.goto(command.url, { waitUntil: "load", timeout: 20000 });
      return { ok: true, status: response.status(), headers: response.headers() };
    }
    case "eval":
      return { value: await page.evaluate(command.expr) };
    case "waitFor":
      await page.waitForFunction(command.expr, { timeout: command.timeout || 10000, polling: 50 });
      return { ok: true };
    case "click":
      await page.mouse.click(command.x, command.y);
      return { ok: true };
    case "clickSelector":
      await page.click(command.selector);
      return { ok: true };
    case "screenshot":
      await page.screenshot({ path: command.path, type: "png" });
      return { path: command.path };
    case "console":
      return { lines: consoleLines.splice(0) };
    case "close":
      await browser.close();
      process.exit(0);
    default:
      return { error: `unknown op ${command.op}` };
  }
}

let queue = Promise.resolve();
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const command = JSON.parse(line);
  queue = queue.then(() => run(command)).then(reply, (error) => reply({ error: String(error && error.message || error), console: consoleLines.splice(0) }));
});
process.stdin.on("end", async () => { await queue; await browser.close(); process.exit(0); });
