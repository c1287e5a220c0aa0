// The official Daytona SDK's documented calls against a Daytona API
// (DAYTONA_API_URL, DAYTONA_API_KEY, DAYTONA_TARGET), each checked for its
// documented result. One JSON line per step: {step, ok, detail, ms}.
// SCENARIO_SNAPSHOT names a snapshot to create from; SCENARIO_IMAGE an
// image to build a sandbox from; SCENARIO=faults runs the fault part only.
import { Daytona, Image, DaytonaError, DaytonaNotFoundError } from '@daytonaio/sdk'

const env = process.env
let failed = 0

function out(step, ok, detail, ms) {
  if (!ok) failed++
  console.log(JSON.stringify({ step, ok, detail, ms: Math.round(ms * 10) / 10 }))
}

// step runs fn, whose answer is [ok, detail]; a throw is a failed step.
async function step(name, fn) {
  const t0 = performance.now()
  try {
    const [ok, detail] = await fn()
    out(name, !!ok, detail, performance.now() - t0)
    return ok
  } catch (e) {
    out(name, false, `${e?.constructor?.name}: ${e?.message}`, performance.now() - t0)
    return false
  }
}

// refused runs fn and expects a DaytonaError of the status.
async function refused(fn, status, words) {
  try {
    await fn()
    return [false, 'no error']
  } catch (e) {
    const ok = e instanceof DaytonaError && e.statusCode === status && (!words || String(e.message).includes(words))
    return [ok, `${e?.constructor?.name} ${e?.statusCode}: ${e?.message}`]
  }
}

const daytona = new Daytona()

async function main() {
  if (env.SCENARIO === 'faults') return faults()
  const labels = { scenario: 'sdk', run: env.SCENARIO_RUN || 'x' }
  let sb
  const ok = await step('create from snapshot', async () => {
    sb = await daytona.create({ snapshot: env.SCENARIO_SNAPSHOT, language: 'javascript', labels,
      envVars: { SCENARIO_GREETING: 'hello' }, autoStopInterval: 15 }, { timeout: 120 })
    return [sb.state === 'started' && sb.id && sb.labels.scenario === 'sdk' && sb.user, { id: sb.id, state: sb.state, user: sb.user }]
  })
  if (!ok) return
  try {
    await sandboxSteps(sb, labels)
  } finally {
    await step('delete', async () => {
      await sb.delete(60, true)
      const [gone, detail] = await refused(() => daytona.get(sb.id), 404)
      return [gone, detail]
    })
  }
  if (env.SCENARIO_IMAGE) await imageSteps()
  await step('events channel connected', async () => {
    const d = daytona.eventDispatcher
    return [d && d.isConnected && !d.isFailed, { connected: d?.isConnected, failed: d?.isFailed, error: d?.failError }]
  })
}

async function sandboxSteps(sb, labels) {
  await step('get', async () => {
    const got = await daytona.get(sb.id)
    return [got.id === sb.id && got.state === 'started' && got.toolboxProxyUrl, { state: got.state }]
  })
  await step('list by labels', async () => {
    const ids = []
    for await (const s of daytona.list({ labels })) ids.push(s.id)
    return [ids.length === 1 && ids[0] === sb.id, ids]
  })
  await step('set labels', async () => {
    const l = await sb.setLabels({ ...sb.labels, extra: 'yes' })
    return [l.extra === 'yes' && sb.labels.extra === 'yes', l]
  })
  await step('execute command', async () => {
    const r = await sb.process.executeCommand('echo "$SCENARIO_GREETING" world; exit 3')
    return [r.exitCode === 3 && r.result.trim() === 'hello world', r]
  })
  await step('execute in cwd', async () => {
    const r = await sb.process.executeCommand('pwd', '/tmp')
    return [r.exitCode === 0 && r.result.trim() === '/tmp', r]
  })
  await step('code run', async () => {
    const r = await sb.process.codeRun('console.log(6 * 7)')
    return [r.exitCode === 0 && r.result.trim() === '42', r]
  })
  await step('home and work dir', async () => {
    const home = await sb.getUserHomeDir()
    const work = await sb.getWorkDir()
    await sb.refreshData()
    const who = await sb.process.executeCommand('id -un; echo "$HOME"')
    const [user, envHome] = who.result.trim().split('\n')
    return [home?.startsWith('/') && work?.startsWith('/') && user === sb.user && envHome === home, { home, work, user }]
  })
  await sessionSteps(sb)
  await fileSteps(sb)
  await gitSteps(sb)
  await previewSteps(sb)
  await lifecycleSteps(sb)
  await step('snapshot list', async () => {
    const page = await daytona.snapshot.list()
    return [page.items.some((s) => s.name === env.SCENARIO_SNAPSHOT && s.state === 'active'), { total: page.total }]
  })
  await step('volumes answer 501', () => refused(() => daytona.volume.list(), 501, 'volumes'))
  await step('computer use answers 501', () => refused(() => sb.computerUse.start(), 501, 'computer use'))
}

async function sessionSteps(sb) {
  const sid = 'scenario-session'
  await step('session create', async () => {
    await sb.process.createSession(sid)
    const s = await sb.process.getSession(sid)
    return [s.sessionId === sid, s]
  })
  await step('session keeps state', async () => {
    await sb.process.executeSessionCommand(sid, { command: 'export SCENARIO_X=kept; cd /tmp' })
    const r = await sb.process.executeSessionCommand(sid, { command: 'echo "$SCENARIO_X $(pwd)"' })
    return [r.exitCode === 0 && r.stdout.trim() === 'kept /tmp', r]
  })
  await step('session async command and logs', async () => {
    const r = await sb.process.executeSessionCommand(sid, { command: `sh -c 'echo out; echo err >&2; exit 4'`, runAsync: true })
    let c
    for (let i = 0; i < 100; i++) {
      c = await sb.process.getSessionCommand(sid, r.cmdId)
      if (c.exitCode !== undefined && c.exitCode !== null) break
      await new Promise((res) => setTimeout(res, 100))
    }
    const logs = await sb.process.getSessionCommandLogs(sid, r.cmdId)
    return [c.exitCode === 4 && logs.stdout.trim() === 'out' && logs.stderr.trim() === 'err', { exitCode: c.exitCode, logs }]
  })
  await step('session delete', async () => {
    await sb.process.deleteSession(sid)
    const l = await sb.process.listSessions()
    return [!l.some((s) => s.sessionId === sid), l.map((s) => s.sessionId)]
  })
}

async function fileSteps(sb) {
  const dir = '/tmp/scenario'
  await step('fs create folder', async () => {
    await sb.fs.createFolder(dir, '755')
    const i = await sb.fs.getFileDetails(dir)
    return [i.isDir && i.name === 'scenario', i]
  })
  await step('fs upload and download', async () => {
    await sb.fs.uploadFile(Buffer.from('alpha\nbeta\n'), `${dir}/a.txt`)
    const b = await sb.fs.downloadFile(`${dir}/a.txt`)
    return [b.toString() === 'alpha\nbeta\n', b.toString()]
  })
  await step('fs bulk upload and download', async () => {
    await sb.fs.uploadFiles([
      { source: Buffer.from('one'), destination: `${dir}/sub/1.txt` },
      { source: Buffer.from('two'), destination: `${dir}/sub/2.txt` },
    ])
    const r = await sb.fs.downloadFiles([{ source: `${dir}/sub/1.txt` }, { source: `${dir}/sub/2.txt` }, { source: `${dir}/none` }])
    const got = r.map((f) => (f.error ? 'error' : f.result.toString()))
    return [got[0] === 'one' && got[1] === 'two' && got[2] === 'error', got]
  })
  await step('fs list', async () => {
    const l = await sb.fs.listFiles(dir)
    const names = l.map((f) => f.name).sort()
    return [names.join(',') === 'a.txt,sub' && l.find((f) => f.name === 'a.txt').size === 11, names]
  })
  await step('fs file details', async () => {
    const i = await sb.fs.getFileDetails(`${dir}/a.txt`)
    return [!i.isDir && i.size === 11 && i.owner && i.modTime, i]
  })
  await step('fs find', async () => {
    const m = await sb.fs.findFiles(dir, 'beta')
    return [m.length === 1 && m[0].file === `${dir}/a.txt` && m[0].line === 2 && m[0].content === 'beta', m]
  })
  await step('fs search', async () => {
    const r = await sb.fs.searchFiles(dir, '*.txt')
    return [r.files.length === 3, r.files]
  })
  await step('fs replace', async () => {
    const r = await sb.fs.replaceInFiles([`${dir}/a.txt`], 'beta', 'gamma')
    const b = await sb.fs.downloadFile(`${dir}/a.txt`)
    return [r[0].success && b.toString() === 'alpha\ngamma\n', { r, content: b.toString() }]
  })
  await step('fs permissions', async () => {
    await sb.fs.setFilePermissions(`${dir}/a.txt`, { mode: '600' })
    const i = await sb.fs.getFileDetails(`${dir}/a.txt`)
    return [i.permissions === '0600', i]
  })
  await step('fs move', async () => {
    await sb.fs.moveFiles(`${dir}/a.txt`, `${dir}/b.txt`)
    const names = (await sb.fs.listFiles(dir)).map((f) => f.name).sort()
    return [names.join(',') === 'b.txt,sub', names]
  })
  await step('fs delete', async () => {
    await sb.fs.deleteFile(`${dir}/sub`, true)
    const names = (await sb.fs.listFiles(dir)).map((f) => f.name)
    const [missing, detail] = await refused(() => sb.fs.getFileDetails(`${dir}/sub`), 404)
    return [names.join(',') === 'b.txt' && missing, { names, detail }]
  })
}

async function gitSteps(sb) {
  const remote = '/tmp/scenario-remote.git'
  const repo = '/tmp/scenario-repo'
  const author = ['scenario', 'scenario@example.com']
  await step('git init bare remote and clone', async () => {
    await sb.git.init(remote, true, 'main')
    await sb.git.clone(remote, repo)
    const s = await sb.git.status(repo)
    return [s.currentBranch === 'main', s]
  })
  await step('git add and commit', async () => {
    await sb.fs.uploadFile(Buffer.from('readme\n'), `${repo}/README.md`)
    const before = await sb.git.status(repo)
    await sb.git.add(repo, ['README.md'])
    const staged = await sb.git.status(repo)
    const c = await sb.git.commit(repo, 'first', ...author)
    const after = await sb.git.status(repo)
    const ok = before.fileStatus[0]?.worktree === 'Untracked' && staged.fileStatus[0]?.staging === 'Added' &&
      /^[0-9a-f]{40}$/.test(c.sha) && after.fileStatus.length === 0
    return [ok, { before: before.fileStatus, staged: staged.fileStatus, sha: c.sha }]
  })
  await step('git push', async () => {
    await sb.git.push(repo)
    const r = await sb.process.executeCommand(`git --git-dir=${remote} log --format=%s main`)
    return [r.result.trim() === 'first', r.result]
  })
  await step('git branches and checkout', async () => {
    await sb.git.createBranch(repo, 'feature')
    const b = await sb.git.branches(repo)
    await sb.git.checkoutBranch(repo, 'main')
    const s = await sb.git.status(repo)
    return [b.branches.includes('feature') && b.branches.includes('main') && s.currentBranch === 'main', { b, current: s.currentBranch }]
  })
  await step('git pull', async () => {
    await sb.process.executeCommand(`git clone -q ${remote} /tmp/scenario-other && cd /tmp/scenario-other && echo two >two.txt &&
git add two.txt && git -c user.name=o -c user.email=o@example.com commit -qm second && git push -q origin main`)
    await sb.git.pull(repo)
    const r = await sb.process.executeCommand(`cat ${repo}/two.txt`)
    return [r.result.trim() === 'two', r.result]
  })
}

async function previewSteps(sb) {
  await sb.process.createSession('web')
  await sb.process.executeSessionCommand('web', { runAsync: true,
    command: `node -e "require('http').createServer((q, s) => s.end('preview ok ' + q.url)).listen(3000)"` })
  await step('preview link', async () => {
    const p = await sb.getPreviewLink(3000)
    let body = ''
    for (let i = 0; i < 50; i++) {
      try {
        const r = await fetch(p.url + '/x', { headers: { 'x-daytona-preview-token': p.token } })
        body = await r.text()
        if (r.status === 200) break
      } catch (e) {
        body = String(e)
      }
      await new Promise((res) => setTimeout(res, 200))
    }
    return [body === 'preview ok /x', { url: p.url, body }]
  })
  await step('preview link refuses without its token', async () => {
    const p = await sb.getPreviewLink(3000)
    const r = await fetch(p.url + '/x', { redirect: 'manual' })
    return [r.status !== 200, { status: r.status }]
  })
  await step('signed preview url', async () => {
    const p = await sb.getSignedPreviewUrl(3000, 60)
    const r = await fetch(p.url)
    const body = await r.text()
    return [body.startsWith('preview ok /'), { url: p.url, body }]
  })
}

async function lifecycleSteps(sb) {
  await step('auto-stop interval', async () => {
    await sb.setAutostopInterval(30)
    await sb.refreshData()
    return [sb.autoStopInterval === 30, { autoStopInterval: sb.autoStopInterval }]
  })
  await step('last activity', async () => {
    await sb.refreshActivity()
    return [true, 'accepted']
  })
  await step('stop', async () => {
    await sb.stop()
    await sb.refreshData()
    return [sb.state === 'stopped', { state: sb.state }]
  })
  await step('start keeps files', async () => {
    await sb.start()
    const r = await sb.process.executeCommand('cat /tmp/scenario/b.txt')
    return [sb.state === 'started' && r.result === 'alpha\ngamma\n', { state: sb.state, result: r.result }]
  })
  await step('archive', async () => {
    await sb.stop()
    await sb.archive()
    await sb.refreshData()
    return [sb.state === 'archived', { state: sb.state }]
  })
  await step('start from archive', async () => {
    await sb.start()
    const r = await sb.process.executeCommand('echo back')
    return [sb.state === 'started' && r.result.trim() === 'back', { state: sb.state }]
  })
  await snapshotSteps(sb)
}

// snapshotSteps take the sandbox's filesystem into a snapshot and create
// a sandbox from it; a fork of a container sandbox is refused.
async function snapshotSteps(sb) {
  await step('fork of a container sandbox refused', () => refused(() => sb.fork(), 422, 'not supported'))
  const name = `scenario-${sb.id.slice(0, 8)}`
  const ok = await step('create snapshot from sandbox', async () => {
    await sb.process.executeCommand('echo forked >/tmp/scenario/fork.txt')
    await sb.createSnapshot(name, 120)
    await sb.refreshData()
    const snap = await daytona.snapshot.get(name)
    return [sb.state === 'started' && snap.state === 'active', { state: sb.state, snapshot: snap.state }]
  })
  if (!ok) return
  await step('create from the sandbox snapshot keeps files', async () => {
    const copy = await daytona.create({ snapshot: name, labels: { scenario: 'sdk-copy' } }, { timeout: 120 })
    try {
      const r = await copy.process.executeCommand('cat /tmp/scenario/fork.txt /tmp/scenario/b.txt')
      return [copy.state === 'started' && r.result === 'forked\nalpha\ngamma\n', { id: copy.id, result: r.result }]
    } finally {
      await copy.delete(60, true)
    }
  })
}

async function imageSteps() {
  let sb
  const ok = await step('create from image (declarative build)', async () => {
    const image = Image.base(env.SCENARIO_IMAGE).runCommands('echo built >/tmp/built.txt')
    sb = await daytona.create({ image, language: 'javascript' }, { timeout: 600 })
    const r = await sb.process.executeCommand('cat /tmp/built.txt')
    return [sb.state === 'started' && r.result.trim() === 'built', { id: sb.id, result: r.result }]
  })
  if (ok) {
    await step('delete the built sandbox', async () => {
      await sb.delete(60, true)
      return refused(() => daytona.get(sb.id), 404)
    })
  }
}

// faults: control plane calls against an emulator failing a share of
// them with 429 or 503. The SDK retries only connections never made, so
// every injected failure reaches the caller as its typed error: count
// them, and check each is DaytonaRateLimitError or
// DaytonaServiceUnavailableError with its status.
async function faults() {
  const n = Number(env.SCENARIO_CALLS || 40)
  const seen = { ok: 0, 429: 0, 503: 0, other: [] }
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    try {
      for await (const _ of daytona.list({ labels: { none: 'x' } })) void _
      seen.ok++
    } catch (e) {
      if (e instanceof DaytonaError && (e.statusCode === 429 || e.statusCode === 503) &&
        e.constructor.name === (e.statusCode === 429 ? 'DaytonaRateLimitError' : 'DaytonaServiceUnavailableError')) {
        seen[e.statusCode]++
      } else {
        seen.other.push(`${e?.constructor?.name} ${e?.statusCode}: ${e?.message}`)
      }
    }
  }
  out('faults reach the caller typed, not retried', seen.other.length === 0 && seen.ok > 0 && seen[429] + seen[503] > 0, seen,
    performance.now() - t0)
  let notFound = false
  try {
    await daytona.get('no-such-sandbox')
  } catch (e) {
    notFound = e instanceof DaytonaNotFoundError || (e instanceof DaytonaError && [429, 503].includes(e.statusCode))
  }
  out('a missing sandbox is DaytonaNotFoundError', notFound, null, 0)
}

try {
  await main()
} finally {
  await daytona[Symbol.asyncDispose]()
}
process.exit(failed ? 1 : 0)
