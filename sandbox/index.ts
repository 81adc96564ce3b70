/** Containers through the Docker engine: the sandbox runner and the Docker fingerprint. */
export { connectSandbox, SandboxRunner, type SandboxOptions } from './runner.js';
export { collectDockerFingerprint, DockerFingerprint, dockerFingerprintIfAny } from './fingerprint.js';
export { dockerClient, engineReachable } from './engine.js';
