// Writes the FAPI 2.0 clients of the bench's FAPI mode to a file (mode 0600): one client per
// algorithm FAPI 2.0 allows (ES256, PS256), each with a fresh private key (jose) for its
// private_key_jwt assertions and the public key both servers register. The driver
// (bench.mjs with FAPI_CLIENTS) signs with the private key; peer-server.mjs and the local
// server's seed (bench/peer.sh) take the public one. Bench keys only, made per run.
//
//   node fapi-clients.mjs FILE
import { writeFileSync } from 'node:fs';

import { exportJWK, generateKeyPair } from 'jose';

const file = process.argv[2];
if (!file) {
  console.error('usage: node fapi-clients.mjs FILE');
  process.exit(2);
}

const clients = [];
for (const alg of ['ES256', 'PS256']) {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `bench-${alg.toLowerCase()}-${crypto.randomUUID()}`;
  const jwk = { ...(await exportJWK(privateKey)), kid, alg, use: 'sig' };
  const pub = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  clients.push({ client_id: `fapi-${alg.toLowerCase()}`, alg, jwk, public: pub });
}
writeFileSync(file, `${JSON.stringify({ clients }, null, 2)}\n`, { mode: 0o600 });
