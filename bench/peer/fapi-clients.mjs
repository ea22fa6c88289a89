// The FAPI 2.0 clients of the bench's FAPI mode: one client per algorithm FAPI 2.0 allows
// (ES256, PS256), each with a fresh private key (jose) for its private_key_jwt assertions and
// the public key both servers register. The driver (bench.mjs with FAPI_CLIENTS) signs with the
// private key; peer-server.mjs registers the public one, and so does the local server's seed,
// which seedClients makes as test/fapi/lib.mjs's fapiClient does. Bench keys only, made per run.
//
//   node fapi-clients.mjs FILE                          writes the clients (mode 0600)
//   node fapi-clients.mjs FILE SEED REDIRECT_URI        and replaces the clients of the
//                                                       local server's seed file SEED with them
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

import { exportJWK, generateKeyPair } from 'jose';

export const ALGS = ['ES256', 'PS256'];

// makeClients returns [{ client_id, alg, jwk (private), public }], one per algorithm.
export async function makeClients() {
  const clients = [];
  for (const alg of ALGS) {
    const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
    const kid = `bench-${alg.toLowerCase()}-${crypto.randomUUID()}`;
    const jwk = { ...(await exportJWK(privateKey)), kid, alg, use: 'sig' };
    const pub = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
    clients.push({ client_id: `fapi-${alg.toLowerCase()}`, alg, jwk, public: pub });
  }
  return clients;
}

// seedClients is the local server's seed entry of each client: profile fapi2, PKCE, PAR,
// DPoP-bound tokens, private_key_jwt with the client's public key, id_tokens in its algorithm.
export function seedClients(clients, redirectUri) {
  return clients.map((c) => ({
    client_id: c.client_id,
    name: `FAPI ${c.alg} load`,
    redirect_uris: [redirectUri],
    scopes: ['openid', 'email', 'phone', 'profile'],
    profile: 'fapi2',
    require_pkce: true,
    require_pushed_authorization_requests: true,
    dpop_bound_access_tokens: true,
    token_endpoint_auth_method: 'private_key_jwt',
    jwks: { keys: [c.public] },
    id_token_signed_response_alg: c.alg,
  }));
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [file, seed, redirectUri] = process.argv.slice(2);
  if (!file || (seed && !redirectUri)) {
    console.error('usage: node fapi-clients.mjs FILE [SEED REDIRECT_URI]');
    process.exit(2);
  }
  const clients = await makeClients();
  writeFileSync(file, `${JSON.stringify({ clients }, null, 2)}\n`, { mode: 0o600 });
  if (seed) {
    const s = JSON.parse(readFileSync(seed, 'utf8'));
    s.clients = seedClients(clients, redirectUri);
    writeFileSync(seed, `${JSON.stringify(s, null, 2)}\n`, { mode: 0o600 });
  }
}
