/**
 * What each variable of the compose files sets, for docs/reference.md's table and the generated
 * `.env.example`. The defaults are not written here: they are read from the compose files
 * themselves (`${NAME:-default}`, `${NAME:?why}` for a required one), so they have one home, and
 * a variable a compose file uses without a line here fails `npm test`.
 */
export const COMPOSE_VARIABLES: Readonly<Record<string, string>> = {
  FSBENCH_IMAGE: 'the image of the coordinator and agents; `docker compose up` in a checkout builds it when missing',
  FSBENCH_REVISION: 'the git commit the image is built from, its `org.opencontainers.image.revision` label: `FSBENCH_REVISION=$(git rev-parse HEAD) docker compose build`',
  FSBENCH_PUBLISH: "where the coordinator's API and dashboard are published on this host",
  FSBENCH_TOKEN: 'bearer token for submissions (16+ characters), given to the coordinator only; without it the coordinator accepts writes only from inside its own container',
  FSBENCH_ALLOWED_HOSTS: "names clients reach the coordinator by, besides localhost, IP addresses and `coordinator` (reads naming another Host are refused)",
  REDIS_PASSWORD: "Redis's password, 16+ of `[A-Za-z0-9._~-]`; generated on the first start and kept in the redis-secret volume when not given, required with the TLS port",
  REDIS_URL: "the Redis agents take their runs from: this stack's, or on another machine the coordinator's TLS port (`rediss://:<REDIS_PASSWORD>@<host>:6380`, or with the agent's ACL user `rediss://fsbench-agent-<host id>:<its password>@<host>:6380`)",
  FSBENCH_REDIS_CA: "for agents on another machine: the CA certificate Redis's TLS certificate is checked against, as PEM text",
  FSBENCH_REDIS_CERT: 'for agents on another machine: a client certificate for Redis, as PEM text, when Redis asks for one',
  FSBENCH_REDIS_KEY: "for agents on another machine: that client certificate's key, as PEM text",
  FSBENCH_REDIS_PUBLISH: "with compose.redis-publish.yaml: where Redis's plain port is published on this host (loopback only: Redis refuses to start otherwise)",
  FSBENCH_REDIS_TLS_DIR: "with compose.redis-tls.yaml: the directory holding Redis's `ca.crt`, `redis.crt` and `redis.key`",
  FSBENCH_REDIS_TLS_PUBLISH: "with compose.redis-tls.yaml: where Redis's TLS port is published for agents on other machines",
  FSBENCH_REDIS_USERS: "with compose.redis-acl.yaml: the directory of the ACL users' `<user>.acl` and `<user>.password` files (`fsbench agents acl --out`), which Redis loads at start",
  FSBENCH_SENTINEL_DOWN_AFTER: "with compose.sentinel.yaml: how long (ms) the primary must be silent before the sentinels fail over",
  FSBENCH_JOB_KEY: "the coordinator's public job key: agents run only jobs it signed; on another machine its PEM text (`docker compose exec coordinator cat /data/job-key.pub.pem`)",
  FSBENCH_ENROLL_TOKEN: 'for agents on another machine: a one-time enrollment token (`fsbench agents token` on the coordinator\'s machine); without one, approve the agent there with `fsbench agents approve`',
  FSBENCH_MACHINE: "the name of this machine's agents in results, history and enrollment; when empty, the name in FSBENCH_HOSTNAME_FILE",
  FSBENCH_HOSTNAME_FILE: "the host's file that names this machine, mounted read-only into the agents, so their name outlives their containers",
  FSBENCH_LABELS: "labels of this machine's agents, comma-separated (placement by labels)",
  FSBENCH_HOST_ID: 'tests and simulations only: agents with different host ids on one kernel measure at once',
  FSBENCH_STALL_TIMEOUT: "the agents' FSBENCH_STALL_TIMEOUT (a duration): how long a dead agent's run stays claimed before another agent retries it; when empty, the agent's default",
  FSBENCH_AGENT_MEMORY: 'memory limit of each agent container (runs\' tmpfs pages count against it)',
  FSBENCH_JOURNAL_VOLUME: "the agents' shared journal of host changes: a volume name, or a host path to share it with other compose projects",
  DOCKER_SOCKET: "with compose.sandbox.yaml: the engine's socket, given to the agents for container.* cells (which makes them root on this host)",
};
