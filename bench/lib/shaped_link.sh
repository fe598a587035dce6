# Sourced by the SSH benchmarks (bench/ssh_bootstrap.sh, bench/upgrade_delta.sh): a private
# network namespace whose loopback is shaped to 20 Mbit/s (tc tbf), a throwaway user, a real
# OpenSSH sshd on 127.0.0.1:2222 and a delaying TCP proxy on 127.0.0.1:2223 adding DELAY_MS
# (default 25) each way (this kernel has no `tc netem`). Needs root.
#
# The caller sets NS (namespace name), U (user name) and T (a scratch directory), calls
# `shaped_link_up`, and has `shaped_link_down` in its EXIT trap. After `shaped_link_up`:
# "$T/home/.ssh/id" is the user's key, "$T/home/.ssh/known_hosts" knows the proxy's port,
# RXO holds the options `reasonix` needs to reach the host through the proxy, and
# `ns CMD…` runs a command inside the namespace with HOME="$T/home".

shaped_link_down() {
  ip netns pids "$NS" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  # Everything of the bench user runs inside the namespace (sshd's children): killed above.
  sleep 0.2; userdel -r "$U" 2>/dev/null || true
  rm -rf "$T"
}

shaped_link_up() {
  ip netns add "$NS"
  # Ethernet-sized packets: with loopback's 64 KiB MTU every segment is larger than the tbf
  # bucket and the shaper drops it, which measures retransmission timers instead of a link.
  ip netns exec "$NS" ip link set lo up mtu 1500
  ip netns exec "$NS" tc qdisc add dev lo root tbf rate 20mbit burst 32kbit latency 400ms
  useradd -m -s /bin/bash "$U" && usermod -p '*' "$U"
  mkdir -p /run/sshd "$T/home/.ssh"
  ssh-keygen -q -t ed25519 -N '' -f "$T/hostkey"
  ssh-keygen -q -t ed25519 -N '' -f "$T/home/.ssh/id"
  install -d -m 700 -o "$U" -g "$U" "/home/$U/.ssh"
  install -m 600 -o "$U" -g "$U" "$T/home/.ssh/id.pub" "/home/$U/.ssh/authorized_keys"
  cat > "$T/sshd_config" <<CFG
Port 2222
ListenAddress 127.0.0.1
HostKey $T/hostkey
PidFile $T/sshd.pid
UsePAM no
PasswordAuthentication no
PubkeyAuthentication yes
Subsystem sftp internal-sftp
CFG
  ip netns exec "$NS" /usr/sbin/sshd -f "$T/sshd_config" -E "$T/sshd.log"
  # Delay proxy: 127.0.0.1:2223 -> 127.0.0.1:2222, +DELAY_MS per direction.
  cat > "$T/proxy.py" <<'PY'
import asyncio
DELAY = float(__import__('os').environ.get('DELAY_MS', '25')) / 1000
async def pipe(r, w):
    try:
        while True:
            data = await r.read(65536)
            if not data:
                break
            await asyncio.sleep(DELAY)
            w.write(data); await w.drain()
    finally:
        w.close()
async def handle(cr, cw):
    sr, sw = await asyncio.open_connection("127.0.0.1", 2222)
    await asyncio.gather(pipe(cr, sw), pipe(sr, cw))
async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", 2223)
    async with srv: await srv.serve_forever()
asyncio.run(main())
PY
  ip netns exec "$NS" env DELAY_MS="${DELAY_MS:-25}" python3 "$T/proxy.py" 2>/dev/null &
  # Wait until the proxy listens (a loaded machine starts python slowly).
  local _
  for _ in $(seq 100); do
    ip netns exec "$NS" bash -c 'exec 3<>/dev/tcp/127.0.0.1/2223' 2>/dev/null && break
    sleep 0.1
  done
  echo "[127.0.0.1]:2223 $(cut -d' ' -f1-2 "$T/hostkey.pub")" > "$T/home/.ssh/known_hosts"
  RXO=(-p 2223 -i "$T/home/.ssh/id" -o UserKnownHostsFile="$T/home/.ssh/known_hosts" -o IdentitiesOnly=yes)
}

ns() { ip netns exec "$NS" env HOME="$T/home" "$@"; }
