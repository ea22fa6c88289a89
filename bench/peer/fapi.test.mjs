// The FAPI mode of bench/peer.sh, checked on both servers it compares: oidc-provider as
// peer-server.mjs configures it, and the local server (the binary AUTHSERVER names, or one
// built from this checkout) seeded with fapi-clients.mjs's seed entries, as peer.sh does.
// Each refuses an authorization request that was not pushed, asks for a DPoP nonce, and gives
// the driver's client (lib/fapi.mjs) DPoP-bound tokens and an id_token in the client's
// algorithm, for ES256 and for PS256. Then the driver's profiling: bench.mjs with PPROF_URL
// saves CPU and allocation profiles of the local server's measured window.
//
//   cd bench/peer && npm ci && node --test
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';

import * as oauth from 'oauth4webapi';

import { ALGS, makeClients, seedClients } from './fapi-clients.mjs';
import { FapiClient, discover, readClients } from './lib/fapi.mjs';
import { makeDispatcher } from './lib/ua.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
const PATH = '/v2/authentication/oauth2';
const REDIRECT_URI = 'http://127.0.0.1:4499/callback';
const USER = { username: 'alice', password: 'correct-horse-battery-staple' };

const work = mkdtempSync(join(tmpdir(), 'peer-fapi-'));
const clientsFile = join(work, 'fapi-clients.json');
const dispatcher = makeDispatcher(8);

async function freePort() {
  const srv = createServer();
  await new Promise((resolve, reject) => srv.listen(0, '127.0.0.1', resolve).on('error', reject));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

// start runs a server and waits for its discovery document.
async function start(cmd, args, env, issuer) {
  const log = [];
  const child = spawn(cmd, args, { cwd: HERE, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (b) => log.push(b.toString()));
  child.stderr.on('data', (b) => log.push(b.toString()));
  let exited = null;
  child.on('exit', (code) => { exited = code; });
  for (let i = 0; ; i += 1) {
    if (exited !== null) throw new Error(`${cmd} exited with ${exited}:\n${log.join('')}`);
    try {
      if ((await fetch(`${issuer}/.well-known/openid-configuration`)).ok) break;
    } catch { /* not listening yet */ }
    if (i > 300) throw new Error(`${cmd} did not answer within 30 s:\n${log.join('')}`);
    await sleep(100);
  }
  return {
    child,
    async stop() {
      if (exited === null) {
        const done = new Promise((resolve) => child.on('exit', resolve));
        child.kill('SIGTERM');
        await done;
      }
    },
  };
}

function authserverBinary() {
  if (process.env.AUTHSERVER) return process.env.AUTHSERVER;
  const bin = join(work, 'authserver');
  execFileSync('go', ['build', '-o', bin, './cmd/authserver'], { cwd: ROOT, stdio: 'inherit' });
  return bin;
}

const servers = {
  async 'oidc-provider'() {
    const issuer = `http://127.0.0.1:${await freePort()}${PATH}`;
    const s = await start(process.execPath, ['--env-file=peer.env', 'peer-server.mjs'], { ISSUER: issuer, FAPI_CLIENTS: clientsFile }, issuer);
    return { ...s, issuer };
  },
  async 'the local server'() {
    const port = await freePort();
    const pprofPort = await freePort();
    const seed = join(work, 'seed.json');
    writeFileSync(seed, JSON.stringify({
      clients: seedClients(readClients(clientsFile), REDIRECT_URI),
      users: [{ uid: 'uid-alice', ...USER, email: 'alice@example.com', email_verified: true }],
    }), { mode: 0o600 });
    const issuer = `http://127.0.0.1:${port}${PATH}`;
    const s = await start(authserverBinary(), [
      '--addr', `127.0.0.1:${port}`, '--data', join(work, `data-${port}`), '--seed', seed, '--pprof', `127.0.0.1:${pprofPort}`,
    ], { AUTH_DPOP_NONCES: 'on', AUTH_RATE_LIMIT: 'false', AUTH_LOG_LEVEL: 'warn', AUTH_EMBEDDED_NO_SYNC: 'true' }, issuer);
    return { ...s, issuer, pprofURL: `http://127.0.0.1:${pprofPort}` };
  },
};

before(async () => {
  writeFileSync(clientsFile, JSON.stringify({ clients: await makeClients() }), { mode: 0o600 });
});

after(async () => {
  await dispatcher.close();
  rmSync(work, { recursive: true, force: true });
});

for (const [name, startServer] of Object.entries(servers)) {
  describe(`FAPI mode on ${name}`, () => {
    let server;
    let as;
    before(async () => {
      server = await startServer();
      as = await discover(server.issuer, dispatcher);
    });
    after(async () => { await server?.stop(); });

    test('an authorization request that was not pushed gets no code', async () => {
      // The client is registered: the same request pushed gets a request_uri.
      const fc = await new FapiClient(as, readClients(clientsFile)[0], {
        redirectUri: REDIRECT_URI, ...USER, scope: 'openid', dispatcher,
      }).init();
      const DPoP = await fc.dpopHandle();
      const pushed = await fc.withNonceRetry(
        () => oauth.pushedAuthorizationRequest(as, fc.client, fc.auth, new URLSearchParams({
          redirect_uri: REDIRECT_URI, response_type: 'code', scope: 'openid', state: 'state-0123456789',
          code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256',
        }), { DPoP, ...fc.opts }),
        (res) => oauth.processPushedAuthorizationResponse(as, fc.client, res),
      );
      assert.match(pushed.request_uri, /^urn:ietf:params:oauth:request_uri:/);

      const url = new URL(as.authorization_endpoint);
      url.search = new URLSearchParams({
        client_id: fc.client.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'openid',
        state: 'state-0123456789', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256',
      }).toString();
      const res = await fetch(url, { redirect: 'manual' });
      const location = res.headers.get('location');
      if (location && location.startsWith(REDIRECT_URI)) {
        const back = new URL(location);
        assert.equal(back.searchParams.get('code'), null);
        assert.equal(back.searchParams.get('error'), 'invalid_request');
      } else {
        assert.equal(res.status, 400, `HTTP ${res.status}, location ${location}`);
      }
    });

    for (const alg of ALGS) {
      test(`the ${alg} client: PAR, login and consent, DPoP-bound tokens with a server nonce, ${alg} id_token, refresh`, { timeout: 60_000 }, async () => {
        const fc = await new FapiClient(as, readClients(clientsFile).find((c) => c.alg === alg), {
          redirectUri: REDIRECT_URI, ...USER, scope: 'openid email phone profile', dispatcher,
        }).init();
        const DPoP = await fc.dpopHandle();
        const { json } = await fc.exchange(await fc.mintCode(DPoP));
        assert.equal(json.token_type, 'dpop');
        assert.equal(JSON.parse(Buffer.from(json.id_token.split('.')[0], 'base64url')).alg, alg);
        assert.ok(fc.nonceRetries >= 1, 'the server asked for a DPoP nonce');
        assert.equal(typeof json.refresh_token, 'string');
        const refreshed = await fc.refresh(json.refresh_token, DPoP);
        assert.equal(refreshed.json.token_type, 'dpop');
        assert.notEqual(refreshed.json.access_token, json.access_token);
      });
    }

    if (name === 'the local server') {
      // Asynchronous: the server writes its log to a pipe this process reads.
      test('the driver saves CPU and allocation profiles of the measured window', { timeout: 120_000 }, async () => {
        const profiles = join(work, 'profiles');
        await promisify(execFile)(process.execPath, ['--env-file=peer.env', 'bench.mjs'], {
          cwd: HERE,
          env: {
            ...process.env, ISSUER: server.issuer, FAPI_CLIENTS: clientsFile, PPROF_URL: server.pprofURL, PROFILE_DIR: profiles,
            PHASES: 'refresh', C: '2', D: '1', WARMUP: '0', LABEL: 'service-1', OUT: join(work, 'bench.json'),
          },
        });
        const files = readdirSync(profiles).sort();
        for (const alg of ALGS) {
          for (const kind of ['allocs-end', 'allocs-start', 'cpu']) {
            const f = join(profiles, `service-1-${alg}-refresh.${kind}.pb.gz`);
            assert.ok(existsSync(f) && statSync(f).size > 0, `${f} among ${files}`);
          }
        }
        const { stdout: top } = await promisify(execFile)('go', ['tool', 'pprof', '-top', join(profiles, 'service-1-ES256-refresh.cpu.pb.gz')]);
        assert.match(top, /Type: cpu/);
      });
    }
  });
}

