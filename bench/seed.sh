# Sourced by bench.sh and peer.sh: the client and user of bench/peer/peer.env (public
# bench credentials, nothing of a real deployment), so one seed serves both benches.
export CLIENT_ID=acceptance-client CLIENT_SECRET=acceptance-secret-0123456789abcdef
export REDIRECT_URI=http://127.0.0.1:4499/callback USERNAME=alice PASSWORD=correct-horse-battery-staple

# write_seed FILE writes the seed file the server loads with --seed.
write_seed() {
	cat >"$1" <<EOF
{"clients": [{"client_id": "$CLIENT_ID", "client_secret": "$CLIENT_SECRET", "name": "Load",
  "redirect_uris": ["$REDIRECT_URI"], "scopes": ["openid", "email", "phone", "profile"]}],
 "users": [{"uid": "uid-alice", "username": "$USERNAME", "password": "$PASSWORD", "email": "alice@example.com",
  "email_verified": true, "phone": "+33612345678", "name": "Alice Martin", "given_name": "Alice",
  "family_name": "Martin", "birthdate": "1990-04-01", "locale": "fr-FR", "zone_info": "Europe/Paris",
  "companyProfileId": "cp-1", "companyUserId": "cu-1"}]}
EOF
}
