export { runCli, parseFlags, usage, COMMANDS, UsageError, type CliEnv, type CliIo } from './cli';
