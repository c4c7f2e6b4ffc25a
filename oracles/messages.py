"""User-visible messages. Tests import these constants instead of restating text.

Error messages are ``(problem, fix)`` pairs that ``StagecheckError.of`` formats; the
front end adds where the value came from (``argument BASELINE: ...``).
"""

# --------------------------------------------------------------------------- targets
TARGET_FORMS = ("a builtin name ({builtins}), 'package.module:function', "
                "'path/to/file.py::function' or 'git:REV:path/to/file.py::function'")
TARGET_EMPTY = ("the target is empty", "give " + TARGET_FORMS)
TARGET_UNKNOWN = ("{value!r} is not a builtin target{hint}, a 'module:function', a "
                  "'file.py::function' nor a 'git:REV:file.py::function'",
                  "builtins are {builtins}")
TARGET_FILE_WITHOUT_FUNCTION = ("{value!r} names a file, not a function in it",
                                "write '{value}::FUNCTION' for a staging function in it; a shim "
                                "file goes with --shim {value}")
TARGET_FILE_MISSING = ("file {path!r} in {value!r} does not exist",
                       "check the path (relative paths are taken from {cwd})")
TARGET_FILE_SYNTAX = ("{path!r} in {value!r} is not valid Python ({error})",
                      "fix the file or point at another revision")
TARGET_FUNCTION_MISSING = ("{path!r} has no module-level function {name!r} (in {value!r})",
                           "functions there: {available}{classes}")
#: ... where the file holds classes: a class is what a protocol drives
#: a target name the file binds by assignment (an alias, a lambda), not by def
TARGET_ASSIGNED = ("{path!r} binds {name!r} by assignment at line {line} ({name} = {bound}), "
                   "not by a def (in {value!r}); stagecheck loads a function from its def")
TARGET_ASSIGNED_FIX_ALIAS = "it is an alias of {refers!r}: name that def, '{file}::{refers}'"
#: mutants of an async def: the file has it, but its calls run none of its body
MUTANTS_POOL_ENDED = ("a process of the mutants pool (--jobs {jobs}) ended abruptly without a "
                      "signal to stagecheck (killed from outside, or by the system for "
                      "memory) before its mutant's result came; no verdict",
                      "run it again; with --jobs 1 the mutants run one after another in "
                      "this process's own worker")
MUTANTS_ASYNC_TARGET = ("{path!r} defines {value!r} with async def: a call of it returns a "
                        "coroutine and runs none of its body, so no mutant of it could be "
                        "told from it",
                        "mutate the plain function that does the staging; 'stagecheck spec' "
                        "reports what the async one stages")
#: ... where a class of the file has a method of the name asked for
TARGET_METHOD_THERE = ("; class {owner} there has a method {name!r}: give {spec} to check it "
                       "as a function")
TARGET_CLASSES_THERE = ("; classes there: {classes} (a class, or Class.method, is checked "
                        "across engine steps by diff or spec with --protocol NAME|FILE, "
                        "docs/protocols.md)")
TARGET_CLASS_MISSING = ("{path!r} has no module-level class {name!r} (in {value!r})",
                        "classes there: {available}")
TARGET_METHOD_MISSING = ("class {name!r} in {path!r} has no method {method!r} (in {value!r})",
                         "its methods: {available}")
TARGET_METHOD_KIND = ("{name!r} in {value!r} is a class method without a parameter for its "
                      "class: Python cannot call it",
                      "give it one (def {method}(cls, ...)): a class method is loaded bound "
                      "to its class, compiled from the file; a static method as a plain "
                      "function, a plain method as a function taking self")
TARGET_NOT_FUNCTION = ("{name!r} in {value!r} is a {kind}, not a function",
                       "name the staging function itself; an engine component class is "
                       "checked step after step by 'stagecheck diff' or 'stagecheck spec' "
                       "with --protocol NAME|FILE ('stagecheck protocol list')")
TARGET_BAD_SYNTAX = ("{value!r} is malformed: {why}",
                     "write 'path/to/file.py::function' or 'package.module:function'")
TARGET_ONE_COLON = ("{value!r} names a file with one colon, which is a module target's "
                    "separator", "write '{path}::{name}' (two colons after a file)")
TARGET_MODULE_MISSING = ("module {module!r} in {value!r} cannot be imported ({error})",
                         "install it or use 'path/to/file.py::{name}' to load the file "
                         "without its imports")
TARGET_ATTRIBUTE_MISSING = ("module {module!r} has no attribute {name!r} (in {value!r})",
                            "check the function name")
TARGET_SIGNATURE = ("{value!r} has signature {signature}, which cannot take the arguments of "
                    "schema {schema!r} through any of its adapters: {unmapped}",
                    "point at the staging function; to bridge another release's parameters, "
                    "give --schema a file whose SCHEMA adds an adapter for them, "
                    "dataclasses.replace(builtin, signatures=(*builtin.signatures, "
                    "Signature(parameters, build))) (docs/schemas.md, 'Signatures')")
TARGET_COMPILE = ("{value!r} could not be compiled on its own: {where} raised {error}",
                  "give that name with --shim FILE.py (a shim's name replaces the file's "
                  "own definition), or load the function as 'package.module:function' where "
                  "its package is installed")
TARGET_NO_SOURCE = ("{value!r} has no Python source file with a module-level function "
                    "{name!r} to mutate", "give 'path/to/file.py::function'")
TARGET_UNRESOLVED = ("{value!r} uses {count} global name(s) stagecheck cannot provide: {names}",
                     "stagecheck does not import engine modules; give each name with "
                     "--shim FILE.py (a module that defines it, e.g. 'def cdiv(a, b): return "
                     "-(a // -b)'; a module object: name it in the shim's __all__; "
                     "repeatable), or load the function as 'package.module:{function}' where "
                     "its package is installed")
#: under a pair's DIFFERENT verdict where every error is a spec violation of both sides alike
BOTH_VIOLATE_ALIKE = ("  both targets violate the spec alike (the same invariants on the same "
                      "fields), and no difference between them was seen: the errors are the "
                      "baseline's as much as the candidate's")
#: ... and under a protocol pair's, where both sides show the same findings in the same words
BOTH_VIOLATE_PROTOCOL_ALIKE = ("  both targets violate the protocol alike (the same findings "
                               "at the same steps and operations), and no difference between "
                               "them was seen: the errors are the baseline's as much as the "
                               "candidate's")
TARGET_IMPORTS_WHEN_CALLED = ("{value!r} imports {module!r} when it is called ({where}), and "
                              "no module of that name can be imported here",
                              "stagecheck does not import engine modules, and a --shim gives "
                              "names to a file's module-level imports only: move the import "
                              "to the top of the file so that --shim FILE.py can give the "
                              "names it takes, or load the function as "
                              "'package.module:function' where its package is installed")
SHIM_MISSING = ("shim {value!r} does not exist (or is a folder)", "give the path of a Python "
                "file (relative paths are taken from {cwd})")
SHIM_BROKEN = ("shim {value!r} cannot be imported ({error})", "fix the file: a shim is a plain "
               "module whose top-level functions and constants stand in for engine helpers")
SCHEMAS_DIFFER = ("{baseline!r} is a {a!r} function but {value!r} is a {b!r} function",
                  "compare two generations of one staging function, or give both the same "
                  "--schema")
GIT_NOT_REPO = ("{value!r} names a git revision but {cwd} is not inside a git repository",
                "run from the repository or use a plain file target")
GIT_BAD_REVISION = ("revision {rev!r} in {value!r} is unknown to git{shallow}",
                    "check it with 'git rev-parse {rev}'; a branch of a remote must be fetched "
                    "('git fetch {remote} {rev}:refs/remotes/{remote}/{rev}') and named "
                    "'{remote}/{rev}'")
GIT_NO_FUNCTION = ("{value!r} names no function or class: a revision target is "
                   "'git:REV:path/to/file.py::function'",
                   "add it after '::': '{value}::NAME' (e.g. "
                   "'{value}::stage_postprocess_inputs_to_gpu')")
GIT_BAD_RELATIVE_REVISION = ("revision {rev!r} in {value!r} is unknown to git{shallow}",
                             "check it with 'git rev-parse {rev}'; a revision counted back "
                             "from another (~N, ^N) needs that much history: 'git log "
                             "--oneline' lists the commits this clone has")
GIT_REVISION_NOT_FETCHED = (
    "revision {rev!r} in {value!r} is unknown to git: this clone is {kind} (how CI systems "
    "check out a pull request), so branch {rev!r} was never fetched into it",
    "fetch it: 'git fetch {depth}{remote} {rev}:refs/remotes/{remote}/{rev}' (a plain 'git "
    "fetch {remote} {rev}' leaves no {remote}/{rev} in a single-branch clone), then name it "
    "'git:{remote}/{rev}:{path}::{name}'")
GIT_PATH_MISSING = ("{path!r} does not exist at revision {rev!r} (in {value!r})",
                    "paths are taken relative to the current folder ({cwd}), as for a file "
                    "target, so this is {rel!r} from the repository root {top}; list that "
                    "folder with 'git ls-tree --name-only {rev} -- {folder}/'")
WORKER_DIED_BETWEEN_CALLS = (
    "a worker ended {during} ({what}), {after}: something {who} left behind ended it (a "
    "thread or a threading.Timer that exits, faulthandler.dump_traceback_later(..., "
    "exit=True), a signal sent later); no call's outcome in that worker can be trusted, so "
    "there is no verdict",
    "end what the code starts before it returns (cancel timers, join threads, "
    "faulthandler.cancel_dump_traceback_later()); 'stagecheck spec TARGET' on each target "
    "alone shows which")
WORKER_LEFT_BEHIND = (
    "the code under test left in its worker what could end that worker later: {left} "
    "(found when the run stopped the worker, {after}: {who} left it); a worker that ends "
    "between calls leaves no call's outcome in it to trust, and whether and when this one "
    "would end cannot be known, so there is no verdict",
    "end what the code starts before it returns (cancel timers, join threads, "
    "faulthandler.cancel_dump_traceback_later(), put back a resource limit it lowers); "
    "'stagecheck spec TARGET' on each target alone shows which")
#: ``what`` of ``WORKER_DIED_BETWEEN_CALLS`` for a worker that did not answer ``stop``
WORKER_STOP_UNANSWERED = ("it did not answer the checker's last request within {seconds:g} s "
                          "of CPU time (3 times that on the wall clock): something left "
                          "behind holds it")
#: a line on stderr: a worker held what could end it later (or had ended) when a run that
#: found errors closed it; the errors stand
WORKER_DIED_AFTER_ERRORS = "stagecheck: note: {error} (the error findings stand: each was seen "\
    "in a call before it)"
BENCH_NOT_EQUIVALENT = (
    "the candidate {candidate!r} does not do what the baseline {baseline!r} does on the "
    "bench's own in-contract input with num_reqs={num_reqs} ({count} difference(s); the "
    "first: {finding}), so its time says nothing of the refactor: nothing was timed",
    "run 'stagecheck diff {baseline} {candidate}' to see the differences; bench times two "
    "targets that stage the same values (a candidate that does less, or nothing, is "
    "faster for it)")
BENCH_HUNG = ("{side} did not return within the time limit (hang) on an in-contract input "
              "with num_reqs={num_reqs}, so it cannot be timed (--timeout {timeout}: seconds "
              "of CPU time for one call or one batch of calls, 3 times that on the wall "
              "clock)",
              "run 'stagecheck diff' on the two targets to see where; a target that is only "
              "slow needs a larger --timeout")
GIT_HUNG = ("'{command}' did not end within {seconds} s (for {value!r}): git hangs here (a "
            "hook, a credential prompt, a lock, or a 'git' earlier on PATH that is not git); "
            "stagecheck ended it",
            "run that command in the repository to see where it waits, and fix that; a slow "
            "file system may need more time: {env}=SECONDS")
GIT_PATH_OUTSIDE = ("{path!r} in {value!r} is outside the git repository at {top}",
                    "paths are taken relative to the current folder, as for a file target")

# --------------------------------------------------------------------------- schemas
SCHEMA_UNKNOWN = ("{value!r} is neither a built-in schema nor a 'path/to/schema.py[:NAME]'"
                  "{guess}",
                  "built-in schemas are {builtins}")
SCHEMA_FILE_MISSING = ("schema file {path!r} (in {value!r}) does not exist",
                       "check the path (relative paths are taken from {cwd})")
SCHEMA_IMPORT = ("schema file {path!r} failed to import ({error})", "fix the file")
SCHEMA_NOT_FOUND = ("{path!r} has no StagingSchema named {name!r}",
                    "give 'path.py:NAME' with one of: {found}")
#: the file defines nothing that is a StagingSchema; ``{what}``: what the name holds
SCHEMA_NONE_IN_FILE = ("{path!r} defines no StagingSchema ({name} {what})",
                       "assign one: {name} = StagingSchema(...) (docs/schemas.md, 'A worked "
                       "example')")
SCHEMA_IS_PROTOCOL = ("{path!r} declares a protocol ({names}), not a StagingSchema",
                      "check it with: stagecheck protocol check {protocol}; run it with "
                      "diff or spec --protocol {protocol}")
SCHEMA_INVALID = ("schema {value!r} is not right: {problems}{more}",
                  "fix the schema; 'stagecheck schema check {value}' lists every problem")
SCHEMA_NONE_FOR = ("no built-in schema describes function {name!r} of {value!r}",
                   "give its schema with --schema (built-in: {builtins}); docs/schemas.md "
                   "says how to write one")

# --------------------------------------------------------------------------- options
# ``option`` is the canonical name; the CLI shows it as --option, the fixture as option=.
BAD_DEVICE = ("{value!r} is not a device", "use 'cpu' or 'cuda'")
CUDA_ONLY = ("{value!r} queues device work on a GPU, and the run is on device 'cpu', where "
             "nothing would read it",
             "leave the option out, or give --device cuda on a GPU machine")
CUDA_UNAVAILABLE = ("'cuda' was asked for but torch sees no CUDA device (torch {torch})",
                    "run on a GPU machine or use device cpu")
BAD_WHOLE = ("{value!r} is not a whole number >= {minimum}", "give e.g. {example}")
BAD_INTEGER = ("{value!r} is not a whole number", "give e.g. {example}")
BAD_SECONDS = ("{value!r} is not a positive number of seconds", "give e.g. {example}")
BAD_CHOICE = ("{value!r} is not one of {choices}", "choose one of them")
TOO_LARGE = ("{value!r} is larger than {limit}, the most this option takes{reason}",
             "give e.g. {example}")
TOO_MANY_SECONDS = ("{value!r} seconds is more than {limit}, the most this option takes{reason}",
                    "give e.g. {example}")
BAD_SWITCH = ("{value!r} is not true or false", "write true or false (TOML booleans; in "
              "Python True or False)")
BAD_TEXT = ("{value!r} is not a text", "write a quoted path or name")
EMPTY_TEXT = ("{value!r} is empty", "give {what}")
BAD_TEXTS = ("{value!r} is not a list of paths", "write e.g. [\"shims/vllm_helpers.py\"]")
BAD_NAMES = ("{value!r} is not a list of names", "write them comma-separated, e.g. "
             "spec,differential")
USAGE = ("{message}", "run '{prog} --help' for the options")
#: argparse's "expected one argument": an option given without its value
OPTION_VALUE_MISSING = "option {flag} needs a value and got none: {flag} {metavar}"
#: a switch (``--deferred-copies``) given a value: argparse's "ignored explicit argument"
SWITCH_VALUE = "option {flag} takes no value, but was given {value}: write {flag} alone"
#: after "unrecognized arguments: ...": the closest option of the command (difflib)
DID_YOU_MEAN = " (did you mean {option}?)"
#: an unknown option that asks for a time budget (--seconds, --time, --duration) of a
#: command whose search is counted in examples: how long it runs is set otherwise
NO_TIME_BUDGET = " ({command} has no time budget: {how})"
NO_TIME_BUDGET_EXAMPLES = "--examples N sets how many examples it tries"
NO_TIME_BUDGET_TIMEOUT = "--timeout S sets how long one call may run"
SAME_REPORT_PATH = ("--json and --junit-xml both name {value!r}", "give each report its own "
                    "path")
UNKNOWN_OPTIONS = ("unknown option(s) {value}", "campaign options are {known}")
# the public API (stagecheck.run_campaign)
NOT_A_TARGET = ("{value!r} (a {kind}) is not a target", "give a target spec (" + TARGET_FORMS.
                format(builtins="'legacy', 'single-loop', ...") + "), a Target or a staging "
                "function")
NOT_A_CAMPAIGN_CONFIG = ("{value!r} (a {kind}) is not a CampaignConfig",
                         "give stagecheck.CampaignConfig(...) or "
                         "stagecheck.CampaignConfig.from_options(examples=..., timeout=...)")
FIXTURE_UNKNOWN_OPTIONS = ("unknown option(s) {value}{hint}", "the fixture takes {known} (the "
                           "example database and derandomize come from the hypothesis "
                           "profile: --hypothesis-profile)")
BAD_ORACLES = ("{value} is not an oracle", "choose from {choices} (comma-separated, e.g. "
               "--oracles spec,differential)")
BAD_OPERATORS = ("{value} is not an operator{hint}", "choose from {choices}")
#: ``mutants`` whose operators make no mutant of the target: nothing would be checked
NO_MUTANTS_OF_OPERATORS = ("no operator of {value} applies to {target}: 0 mutants, nothing "
                           "would be checked", "{fix}")
NO_MUTANTS_OTHERS = ("the operators that apply to it are {others}: give --operators some of "
                     "them, or leave --operators out")
NO_MUTANTS_NONE = ("no operator of the catalog applies to it either: give a staging "
                   "function with copies, loops, asserts or lookups to mutate")
NO_MUTANTS = ("no mutation operator applies to {value}: 0 mutants, nothing would be checked",
              "give a staging function with copies, loops, asserts or lookups to mutate")
REPLAY_UNREADABLE = ("cannot read {value!r} ({error})", "give a replay file written by "
                     "'stagecheck diff'")
REPLAY_IS_MANIFEST = ("{value!r} is the manifest of one run (it lists the {count} replay "
                      "file(s) that run saved), not a replay file",
                      "replay one of the files it lists: stagecheck replay {example}")
REPLAY_MALFORMED = ("{value!r} is not a stagecheck replay file ({error})",
                    "give a file from {save_dir}")
#: a replay file of a format this stagecheck does not read (``report/replay.py``)
REPLAY_NEWER = ("{value!r} was written by a newer stagecheck: its \"{key}\" is {version}, and "
                "this one reads formats 1 to {current}", "upgrade stagecheck, or run the "
                "campaign again with this one to save the finding anew")
REPLAY_NOT_A_FORMAT = ("{value!r} holds \"{key}\": {shown}, which is not a format number",
                       "set \"{key}\" to {current}, the format this stagecheck writes (or "
                       "remove the key)")
REPLAY_UNBUILDABLE = ("the scenario in {value!r} cannot be built: {problems}",
                      "fix the file or re-run the search")
SYMBOLIC_NO_PATH = ("symbolic diff explored no path in {seconds:.1f} s ({unsupported} lost to "
                    "unsupported operations, {timed_out} timed out, {pruned} pruned): {why}. "
                    "Nothing was checked",
                    "give a longer --timeout, or use the fuzzer ('stagecheck diff') for this "
                    "target")
SYMBOLIC_LOST = ("symbolic diff lost {lost} of {total} path(s) to operations the list model "
                 "or CrossHair does not support (first: {first}). A verdict from the "
                 "remaining paths would hide what happens on those",
                 "use the fuzzer ('stagecheck diff') for this target")
CROSSHAIR_TOO_OLD = ("crosshair-tool {found} is installed; the symbolic oracle needs "
                     "{needed} or newer", "pip install 'crosshair-tool>={needed}'")

# --------------------------------------------------------------------------- reports
CLEAN_RUN_HINT = ("No error finding. To search harder: --examples {more} (now {examples}), "
                  "another --seed (now {seed}), or a larger --max-capacity (now {capacity}).")
PROTOCOL_CLEAN_HINT = ("No error finding. To search harder: --examples {more} (now {examples}) "
                       "step sequences, or another --seed (now {seed}){device}.")
KERNEL_CLEAN_HINT = ("No difference. To search harder: --examples {more} (now {examples}) or "
                     "another --seed (now {seed}); on a GPU, --device cuda runs the compiled "
                     "kernel.")
KERNEL_ALWAYS_NO_CONSUMER = ("{value!r} is about the schema's consumer kernel, but schema "
                             "{schema!r} declares none, so there is no kernel to run",
                             "leave the option out; a schema names its kernel with "
                             "consumer= (docs/schemas.md, 'Hooks')")
MAX_DRAFTS_NO_DRAFTS = ("{value!r} bounds draft-token lists, but schema {schema!r} declares "
                        "no draft-list input (Input(drafts=True)), so no list would be drawn",
                        "leave --max-drafts out for this schema; a schema marks its draft "
                        "lists with drafts=True (docs/schemas.md)")
#: a same_outcome error on an input outside the contract (or where the contracts differ)
OUTCOME_WORSE_ON_ANY_INPUT = ("; an error on any input: a call may raise on an input outside "
                              "its contract, never hang or end its process where the "
                              "baseline ended its call")
#: the context of that finding's info where the in-contract stream found the same kind
KNOWN_STOP = ("the in-contract stream already found a call that {what}, an error: the same "
              "error, shrunk once")
#: an error finding whose example, run again alone in a fresh worker, did not show it
NOT_SHOWN_ALONE = ("not shown when its example ran again alone in a fresh worker: it "
                   "depends on the calls before it in the same process (state kept across "
                   "calls, such as a module-level cache or counter) or on chance; its replay "
                   "and its pytest test run it alone and may pass")
#: ``replay`` of such a finding, which shows nothing now
REPLAY_NOT_ALONE = ("when it was found, this example did not show it alone in a fresh worker "
                    "either: it depended on the calls before it (state kept across calls) "
                    "or on chance; run the search that found it again to see it")
#: ``replay --schema`` of a schema other than the one the saved example was drawn for
REPLAY_OTHER_SCHEMA = ("{value!r} is schema {given!r}, but the saved example was drawn for "
                       "schema {saved!r}: its inputs are that schema's",
                       "give --schema the schema the example was drawn for (a file of that "
                       "name), or leave --schema out")
HANG = "the call did not return within the time limit (hang)"
MANIFEST_LINE = "this run saved {count} replay file(s); its manifest lists them: {path}"
SYMBOLIC_UNDECIDED = ("verdict: UNDECIDED on {paths} path(s) — no error finding, {infos} info "
                      "finding(s) on the paths explored, but on {paths} of them numpy made the "
                      "symbolic values concrete, so value-level differences there were sampled, "
                      "not searched. For a verdict run the fuzzer: stagecheck diff {baseline} "
                      "{candidate}{flags}")
INTERRUPTED = ("stagecheck: interrupted by {signal} after {examples} {unit}, {findings} "
               "finding(s) so far ({errors} error, {infos} info){saved}; no verdict: interrupted")
#: a command that counts no examples (schema check, protocol check, replay), interrupted
INTERRUPTED_UNCOUNTED = "stagecheck: interrupted by {signal}; no verdict: interrupted"
REPORT_NOT_WRITTEN = ("cannot write {value!r} ({error})", "the verdict was {verdict}, but a "
                      "requested output is missing, so the exit code is 2, not 0; free space "
                      "or give another path")
REPORT_NOT_WRITTEN_KEPT = ("cannot write {value!r} ({error})", "the exit code stays the "
                           "verdict's ({verdict}: {code}); free space or give another path")
SAVE_DIR_UNWRITABLE = ("cannot write replay files under {value!r}: {why}",
                       "give --save-dir a folder that can be written")
#: the same when --save-dir was not given: the default folder under the current one
SAVE_DIR_DEFAULT_UNWRITABLE = ("cannot write replay files under the default folder {value!r} "
                               "(no --save-dir given): {why}",
                               "give --save-dir a folder that can be written, run from a "
                               "writable folder, or give --no-save (no finding is then saved)")
REPORT_UNWRITABLE = ("cannot write {value!r}: {why}", "give a path in a writable folder")
#: ``replay`` of a saved info finding: whether the step sequence still shows it
REPLAY_INFO_STILL = "the saved info finding [{id}] still shows (info: it does not change the exit code)"
REPLAY_INFO_GONE = "the saved info finding [{id}] no longer shows"
REPLAY_NOTHING = "no finding: the saved example no longer shows a difference"
#: a run of one target (``spec``) says these in place of a pair's verdict words
SPEC_VERDICT = {"EQUIVALENT": "CONFORMS", "DIFFERENT": "VIOLATES"}
#: ... and of one target run through a protocol (``spec --protocol``)
PROTOCOL_SPEC_VERDICT = {"EQUIVALENT": "HOLDS THE PROTOCOL",
                         "DIFFERENT": "VIOLATES THE PROTOCOL"}
#: a protocol report's note: runs on CUDA whose gates the watchdog opened (``gate.py``)
PROTOCOL_GATES_FORCED = ("note: in {runs} run(s) copies completed earlier than the latest "
                         "point (at {where}): the host waited for the device where stagecheck "
                         "does not see it, and after {seconds:g} s the watchdog opened every "
                         "gate, or the protocol's observe read device memory, which on CUDA "
                         "waits for the current stream; a race those copies hold may have "
                         "gone unseen, and what such a wait ordered is not ordered to "
                         "stagecheck (a race reported after it may be one the wait prevents): "
                         "wait with torch.cuda.synchronize, Stream.synchronize or "
                         "Event.synchronize (seen), read device values back in an operation, "
                         "or check the protocol on the CPU model (--device cpu)")
#: two options given together that contradict each other
OPTIONS_CONTRADICT = ("{value} contradicts {other}: {why}", "leave one of them out")
#: ``replay``: an option that the kind of finding the file holds does not read
REPLAY_OPTION_UNUSED = ("{flag} {value} does not apply to the replay file {file!r}: it holds "
                        "{what}", "leave {flag} out{alternative}")
REPLAY_HOLDS_EXAMPLE = "a one-call finding (one example of a staging call), not a step sequence"
REPLAY_HOLDS_SEQUENCE = ("a protocol finding (a step sequence, which its protocol drives), "
                         "not an example of one staging call")
REPLAY_SCHEMA_ALTERNATIVE = ("; a one-call staging protocol's schema is chosen with "
                             "--protocol single-call:SCHEMA")
#: ``replay``'s verdict line: a pair's saved example (or step sequence) now
REPLAY_PAIR_STILL = "verdict: {verdict} — the saved {what} still shows {count} error finding(s)"
REPLAY_PAIR_NOW = "verdict: {verdict} — the saved {what} shows no error finding now"
#: ... and one target's (a finding of ``spec``), in ``spec``'s verdict words
REPLAY_SPEC_STILL = ("verdict: {verdict} — the saved {what} still fails {against}: {count} "
                     "error finding(s)")
REPLAY_SPEC_NOW = "verdict: {verdict} — the saved {what} passes {against} now"
TARGET_PINS_WITHOUT_DEVICE = ("{value!r} pins host memory ({where}: {error}), and this torch "
                              "has no accelerator to pin it: a limit of a CPU-only run, not a "
                              "difference in the code",
                              "check it on the CPU model of the device, which models pinned "
                              "memory (--protocol single-call:{schema}), run it where CUDA is "
                              "(--device cuda), or pin as vLLM does only where pinned memory "
                              "is available (pin_memory=is_pin_memory_available(), a flag the "
                              "function is given)")
TARGET_NEEDS_CUDA = ("{value!r} uses CUDA ({where}: {error}), and this torch has no CUDA "
                     "device: a limit of a CPU-only run, not a difference in the code",
                     "check it on the CPU model of the device, which models streams, events "
                     "and pinned memory (--protocol single-call:{schema}), or run it where "
                     "CUDA is (--device cuda)")
VIEW_REBOUND = ("target {value!r} rebinds .{view} of a paired buffer ({where}): stagecheck "
                "observes the views it made, so what the target does with a new object is "
                "not seen; this is a limit of stagecheck, not a difference in the code",
                "write into the view the buffer has (buf.{view}[:n] = ...) instead of "
                "assigning a new object to buf.{view}")
VIEW_MEMORY_REPLACED = ("target {value!r} gave .{view} of a paired buffer other memory "
                        "(.{view}.set_(...) or .{view}.data = ...): stagecheck observes the "
                        "memory it made, so what the target does through the view then is "
                        "not seen; this is a limit of stagecheck, not a difference in the code",
                        "write into the view's own memory (buf.{view}[:n] = ...) instead of "
                        "giving the view other memory")
#: the schema's build made a Call the function cannot be called with (a binding TypeError)
SCHEMA_CALL_UNBOUND = (
    "schema {schema!r}: the arguments its build gives cannot call {value!r} ({error}): the "
    "function never ran, so this is the schema's mistake, not the code's",
    "make build return Call(args, kwargs) that the function's parameters take, in the order "
    "the schema declares them ({parameters}); 'stagecheck schema check FILE' does not call "
    "the function")
STAND_IN_UNSUPPORTED = (
    "target {value!r} asked the {stand_in} that schema {schema!r} passes it for {operation}, "
    "which the stand-in does not model: this is a limit of the schema, not a difference in "
    "the code",
    "give the schema a stand-in that models it (docs/schemas.md, 'Stand-ins'), or check "
    "this function with a schema of your own (--schema)")

# --------------------------------------------------------------------------- reports (issue 13)
INFO_GROUPED = ("{findings} finding(s) for {reasons} reason(s), one line per reason with one "
                "example; --verbose lists each")
BENCH_RATIOS = ("ratio = the candidate's median / the baseline's median (the two columns "
                "beside it); per-round ratio = the median and interquartile range of the "
                "ratios of rounds that ran both sides back to back (robust to drift, so it "
                "can differ a little from the ratio of medians); a ratio < 1: the candidate "
                "is faster")
#: bench of a target whose schema has no ``bench`` hook: no inputs to time it on
BENCH_NO_SCENARIO = ("schema {schema!r} of {value!r} declares no bench scenario, so bench has "
                     "no inputs to time it on",
                     "give the schema a bench hook, bench(n): a deterministic in-contract "
                     "scenario with n live requests (docs/schemas.md, 'Hooks'); 'stagecheck "
                     "diff' and 'spec' check the target without one")
SAME_REPORT_PATHS = ("{options} name the same path {value!r}", "give each report its own path")

# --------------------------------------------------------------------------- issue 13
# configuration: [tool.stagecheck] in pyproject.toml (oracles/config.py)
#: an unknown key, with the closest key as the command line's options say it ({hint})
CONFIG_UNKNOWN_KEY = ("{value!r} is not a key of [tool.stagecheck] (in {path}){hint}",
                      "remove it or use one of: {known}")
CONFIG_UNREADABLE = ("cannot read {value!r} ({error})", "fix the TOML; stagecheck reads its "
                     "[tool.stagecheck] table")
#: why a pyproject.toml nested too deeply for the TOML reader cannot be read
CONFIG_TOO_DEEP = "it is nested too deeply to be read"
#: a pyproject.toml the search for [tool.stagecheck] stops at that is not a regular file
CONFIG_NOT_FILE = ("{value!r} is {what}, not a file (stagecheck reads the first "
                   "pyproject.toml from the working folder upwards and stops there)",
                   "remove it or rename it, or run from another folder")
CONFIG_NOT_TABLE = ("[tool.stagecheck] in {value!r} is not a table",
                    "write it as a [tool.stagecheck] section of keys")
CONFIG_TWICE = ("[tool.stagecheck] in {path} sets {value!r} twice ({first!r} and {second!r}: "
                "one key, spelt with dashes or underscores)", "keep one of them")
CONFIG_WRONG_TYPE = ("{value!r} is {given}, not {wanted}", "write it as {example}")
CONFIG_USED = "stagecheck: settings from [tool.stagecheck] in {path}: {values}"
#: where a value of the file that a command refuses came from (as a value the table
#: itself refuses is located): the key, not the option the command line never held
CONFIG_WHERE = "[tool.stagecheck] {key} in {path}"
# optional dependencies
KERNEL_EXTRA = "pip install 'stagecheck[kernel]'"
TRITON_EXTRA_MISSING = ("{what} needs triton, which is not installed ({error})",
                        "install the kernel extra: " + KERNEL_EXTRA + "{alternative}")
TRITON_FALLBACK = ("stagecheck: triton is not installed, so the kernel oracle runs the "
                   "reference backend (the same decisions in plain torch); for the Triton "
                   "kernel: " + KERNEL_EXTRA)
# the command line
EXIT_CODES_EPILOG = ("exit codes: 0 clean verdict (every requested output written); "
                     "1 {findings}; 2 usage or load error{two}; 3 internal error (a bug in "
                     "stagecheck: no verdict); 130/143 interrupted (SIGINT/SIGTERM), no "
                     "verdict")
#: the one line of an internal error (exit 3): an exception inside stagecheck
INTERNAL_ERROR = ("stagecheck: internal error (a bug in stagecheck, not a finding against "
                  "the code under test; no verdict): {error}; the full traceback is in "
                  "{path}{partial}; please report it with that file")
INTERNAL_ERROR_UNSAVED = "(no file: neither the save folder nor the temporary folder took it)"
INTERNAL_ERROR_PARTIAL = ("; what the run found before it ({findings} finding(s), {errors} "
                          "error) is saved: {where}")

# ---------------------------------------------------------------- issue 11: hostile inputs
TARGET_IS_FOLDER = ("{path!r} in {value!r} is a folder, not a Python file",
                    "name a .py file in it: 'FOLDER/file.py::function'")
GIT_PATH_IS_TREE = ("{path!r} is a folder (a git tree) at revision {rev!r} (in {value!r})",
                    "name a .py file in it; list it with 'git ls-tree --name-only {rev} -- "
                    "{rel}/'")
TARGET_UNDECODABLE = ("{path!r} in {value!r} cannot be read as Python source: {why}",
                      "save it as UTF-8, or declare its encoding on line 1 or 2 "
                      "('# -*- coding: latin-1 -*-', PEP 263)")
TARGET_BINARY = ("{path!r} in {value!r} is not a text file (it holds NUL bytes)",
                 "name the Python source file of the function")
TARGET_TOO_LARGE = ("{path!r} in {value!r} is {size:,} bytes, more than the {limit:,} a target "
                    "file may have", "name the module that defines the function, or cut the "
                    "file down to it")
REPLAY_UNTRUSTED_TARGET = ("the replay file names the {side} target {target!r}, which is "
                           "neither a builtin nor a file inside this repository ({top}); "
                           "stagecheck does not run code a replay file chose",
                           "if you trust it, name it yourself: stagecheck replay FILE {flags}")
REPLAY_UNTRUSTED_SHIM = ("the replay file names the shim or schema file {target!r}, outside "
                         "this repository ({top}); stagecheck does not run code a replay file "
                         "chose", "if you trust it, give it yourself with --shim or --schema")
REPLAY_TOO_LARGE = ("the replay file is {size:,} bytes, more than the {limit:,} a saved "
                    "example takes", "give a replay file stagecheck saved")
TARGET_LOAD_RAISED = ("loading {value!r} ran code of the file or module that raised {error}",
                      "module-level code a target's loading runs (constants, default "
                      "arguments, class bodies, honoured imports) must not fail or exit")
TARGET_LOAD_ENDED = ("loading {value!r} ended the worker process: {what}",
                     "module-level code a target's loading runs (constants, default "
                     "arguments, class bodies, honoured imports) must not end the process")

# ---------------------------------------------------------------- issue 22: protocols
# loading a protocol (oracles/protocol/load.py): (problem, fix) pairs
PROTOCOL_EMPTY = ("no protocol given ({value!r})",
                  "give a built-in protocol ({builtins}), 'single-call:SCHEMA', or a file "
                  "path/to/protocol.py declaring PROTOCOL")
#: an environment variable stagecheck reads, set to a value it does not take
ENVIRONMENT_VALUE = ("{value!r} is not a value it takes ({sets})",
                     "give {takes}, or unset it for the default: unset {name}")
PROTOCOL_UNKNOWN = ("{value!r} is neither a built-in protocol nor a protocol file{meant}",
                    "give one of {builtins}, 'single-call:SCHEMA', or path/to/protocol.py[:NAME]")
#: 'schema.py:' (as a protocol's 'protocol.py:' is refused): a NAME left out
SCHEMA_NO_NAME = ("{value!r} ends with ':' and names no schema after it",
                  "write path/to/schema.py:NAME, or leave ':NAME' out for the file's SCHEMA")
PROTOCOL_NO_NAME = ("{value!r} ends with ':' and names no protocol after it",
                    "write path/to/protocol.py:NAME, or leave ':NAME' out for the file's "
                    "PROTOCOL")
PROTOCOL_NO_SCHEMA = ("{value!r} names no schema after 'single-call:'",
                      "write single-call:SCHEMA with a built-in schema ({schemas}) or "
                      "path/to/schema.py[:NAME]")
PROTOCOL_FOLDER = ("{value!r} is a folder, not a protocol file",
                   "give the path of the Python file in it that declares PROTOCOL = "
                   "Protocol(...), or one of {builtins}")
PROTOCOL_FILE_MISSING = ("protocol file {path!r} (in {value!r}) does not exist",
                         "give the path of a Python file that declares PROTOCOL = Protocol(...)")
PROTOCOL_IMPORT = ("importing the protocol file {value!r} raised {error}{line}",
                   "fix the file: it must import and declare PROTOCOL = Protocol(...)")
#: after PROTOCOL_IMPORT's TypeError: a declaration class called without a part it needs
PROTOCOL_PART_MISSING = (" (a {cls}(...) needs {parts}; docs/protocols.md, 'What a protocol "
                         "declares', says what each part is)")
PROTOCOL_NOT_DECLARED = ("{path!r} has no Protocol named {name!r} (protocols in it: {found})",
                         "declare PROTOCOL = Protocol(...) at module level, or name one: "
                         "'{path}:NAME'")
PROTOCOL_INVALID = ("protocol {value!r} has {count} problem(s): {problems}",
                    "fix each part named (docs/protocols.md says what each one declares)")
PROTOCOL_NOT_LOADABLE = ("protocol {value!r} was not loaded from a file, so a worker process "
                         "cannot load it", "declare it in a file and give that file")
#: after an outcome "raised E: ...": the exception came from queued device work, which
#: the device ran inside a later call (a synchronization, a blocking read)
PROTOCOL_WORK_RAISED = " (raised by device work {work}, launched at {where})"
PROTOCOL_CODE_RAISED = ("protocol {value!r}: its own code for operation {operation!r} raised "
                        "{error} at {where}, not the code under test",
                        "fix the protocol's function there ('stagecheck protocol check "
                        "FILE TARGET' dry-runs the operations on a target)")
#: the fix added where a target a replay file names cannot be loaded (moved, renamed)
REPLAY_TARGET_ELSEWHERE = ("if it moved, give it where it lies now: {flag} PATH.py::NAME "
                           "(the command line overrides the file's target)")
#: its fix in ``protocol check FILE TARGET``'s own dry run (which is that command)
PROTOCOL_CODE_RAISED_CHECK_FIX = "fix the protocol's function there, then check it again"
#: a protocol's own line used an attribute the target's component lacks: neither side's
#: mistake alone (the two disagree), said of the target
PROTOCOL_COMPONENT_LACKS = ("protocol {value!r}: operation {operation!r} uses {attr!r} of "
                            "{kind} of target {target} at {where}, and that target's {kind} "
                            "has no attribute {attr!r}{guess}",
                            "the protocol and this target disagree on the component's "
                            "interface: fix the protocol's line if the name is misspelt; or "
                            "give a target whose {kind} has {attr!r} (a method renamed "
                            "between the two targets of a diff is such a change), or a "
                            "protocol written for this one")
SCHEMA_STARTS_PROCESSES = ("schema file {value!r} left process(es) running when it was loaded "
                           "and dry-run ({names}); they were ended",
                           "a schema file declares a schema: start nothing when it is "
                           "imported (the checker imports it too), nor in its functions")
PROTOCOL_STARTS_PROCESSES = ("protocol file {value!r} left process(es) running when it was "
                             "loaded and dry-run ({names}); they were ended",
                             "a protocol file declares a protocol: start nothing when it is "
                             "imported (the checker imports it too), nor in its when or checks")
PROTOCOL_CODE_EXITED = ("protocol {value!r}: its own code called {error} at {where}, not the "
                        "code under test", "a protocol's functions return (or raise); fix the "
                        "protocol's code there")
PROTOCOL_CODE_STARTED = ("protocol {value!r}: its own code started a process ({error}) at "
                         "{where}, not the code under test", "a protocol's functions start no "
                         "process (one left running would be charged to the code under "
                         "test); fix the protocol's code there")
PROTOCOL_BUILD_MISMATCH = ("protocol {value!r} cannot build {component}: {error}, raised where "
                           "the protocol calls it ({where}), before any of its code ran",
                           "fix the protocol's build (what it passes to ctx.component), or "
                           "choose the protocol that drives this class with --protocol "
                           "('stagecheck protocol list')")
#: the protocol's own build or observe raised (its innermost frame outside torch and
#: stagecheck lies in the protocol's file, not the target's): the protocol's mistake
PROTOCOL_BUILD_RAISED = ("protocol {value!r}: its own build raised {error} at {where}, not the "
                         "code under test", "fix the protocol's build there: it makes the "
                         "state, usually ctx.component(...) with ctx.device and "
                         "ctx.sequence.capacity (the step context gives state, step, "
                         "sequence, device, component, function, tensor, stage; "
                         "docs/protocols.md)")
#: a protocol's own build, operation code or observe did not return within the per-call
#: limit in a worker (the innermost frame when it was stopped lay in the protocol's file)
PROTOCOL_CODE_HUNG = ("protocol {value!r}: its own {part} did not return within {limit:g} s "
                      "(stopped at {where}), not the code under test",
                      "fix the protocol's function there: build, operations and observe must "
                      "return once the code they call has (a loop of the protocol's own that "
                      "waits for something never ends)")
PROTOCOL_OBSERVE_RAISED = ("protocol {value!r}: its own observe raised {error} at {where} "
                           "after step {step}, not the code under test",
                           "fix the protocol's observe there: it returns plain data the host "
                           "holds after a step (ctx.state's attributes; docs/protocols.md)")
#: observe wrote into pinned memory a copy still reads or fills (the CPU model)
PROTOCOL_OBSERVE_WROTE = ("protocol {value!r}: its observe after step {step} wrote into "
                          "{region} while a copy still reads or fills it, not the code under "
                          "test", "observe reads what the host holds after a step and must "
                          "change nothing: read values (t.tolist(), a copy), never write into "
                          "the component's buffers")
#: an operation or observe handed back a device tensor: the host does not hold it
PROTOCOL_DEVICE_RESULT = ("protocol {value!r}: {part} returned a device tensor{where} after "
                          "step {step}; what an operation or observe returns must be plain "
                          "data the host holds",
                          "return plain data (ints, floats, lists, dicts, host tensors); to "
                          "compare what the device holds, read it back in the operation "
                          "(e.g. t.tolist(), a blocking download the device model sees)")
#: what an operation or observe returned is not plain data: compared as text, two runs of
#: the same code would differ (an object's default text holds its address)
PROTOCOL_NOT_PLAIN = ("protocol {value!r}: {part} returned {what}{where} after step {step}; "
                      "what an operation or observe returns is compared between runs and "
                      "targets, so it must be plain data",
                      "return plain data (None, bools, ints, floats, strings, lists, tuples, "
                      "dicts, sets, host tensors or arrays, dataclasses of these): e.g. "
                      "the object's fields as a dict, obj.ids.tolist() for a tensor")
#: ``diff`` with a protocol: one target's two runs of the same step sequence differ, so a
#: difference between the two targets says nothing about the change (``whose``: "the
#: baseline's", or "" where the two targets are one, as ``protocol check``'s self-run)
PROTOCOL_UNSTEADY = ("protocol {value!r}: {whose}two runs of the same step sequence "
                     "differ ({difference}), so a difference between runs (two targets', or "
                     "one target's under two completion schedules) says nothing about the code",
                     "make the protocol (its operations' results, observe, when) and the "
                     "targets give the same results on the same steps: no clock, random "
                     "numbers or addresses in what they return; then run again")
#: a device_work entry that names no method (an attribute such as a tensor)
PROTOCOL_DEVICE_WORK_NOT_METHOD = ("device_work entry {value!r} of protocol {protocol!r} names "
                                   "{what} of the state it built ({kind}), not a method of the "
                                   "state",
                                   "name a method: the dotted path, from the state, of the "
                                   "method that stands for a kernel (e.g. '_model_forward', "
                                   "'align_ctx.run_fused_precopy'); its device-tensor "
                                   "arguments are what it reads")
#: row_order names no attribute of the built state
PROTOCOL_ROW_ORDER_MISSING = ("row_order {value!r} of protocol {protocol!r} names no attribute "
                              "of the state it built ({kind}): {missing!r} is not there",
                              "give the dotted path, from the state, of the batch's row order "
                              "(request ids), e.g. 'input_batch.req_ids', or leave row_order "
                              "out")
PROTOCOL_STAND_IN = ("the code under test asked the protocol's {value} for {operation}, which "
                     "protocol {protocol!r} does not model: this is a limit of the protocol, "
                     "not a difference in the code",
                     "give the stand-in what the code reads (docs/protocols.md, 'Stand-ins'), "
                     "or write a protocol of your own")
PROTOCOL_DEVICE_RESULT_USED = ("the code under test used what device work {value!r} of protocol "
                               "{protocol!r} returned ({operation}): under stagecheck's "
                               "device model a call of device work is queued and runs when the "
                               "device runs it, so it returns nothing; this is a limit of the "
                               "model, not a finding about the code",
                               "let the device work write its outputs into tensors the state "
                               "holds (an out= argument, or an attribute it fills) and read "
                               "them from there, or leave that method out of device_work "
                               "(docs/protocols.md, 'What a protocol declares')")
PROTOCOL_BUILTIN_TARGET = ("{value!r} is a built-in staging function (one call per example), "
                           "not the component class {component} that this protocol builds",
                           "give the class as FILE::{component} (or module:{component}); a "
                           "built-in staging function runs through a one-call protocol "
                           "(--protocol single-call:SCHEMA) or without --protocol")
PROTOCOL_TARGET_AMBIGUOUS = ("{value!r} names {name!r}, which several built-in protocols drive "
                             "({protocols})", "choose one with --protocol NAME (protocol=NAME in "
                             "assert_protocol)")
PROTOCOL_BUILD_NONE = ("the build of protocol {value!r} returned None",
                       "return the state the steps work on: the component object "
                       "(ctx.component(...)) or an object holding it")
PROTOCOL_DEVICE_WORK_MISSING = ("protocol {protocol!r} declares device work {value!r}{guess}, "
                                "which the state it built ({kind}) does not have",
                                "name methods the component has, as dotted paths from the "
                                "state (e.g. '_model_forward', 'align_ctx.run_fused_precopy')")
PROTOCOL_TARGET_IMPORT = ("importing module {module!r} of target {value!r} raised {error}",
                          "name an importable module, or give the file: 'path/to/file.py::Class'")
PROTOCOL_NO_COMPONENT = ("target {value!r} names no class of its file, and the protocol's "
                         "component class {component!r} is not there either (classes: "
                         "{available})", "name the class to drive: 'FILE::Class' or "
                         "'FILE::Class.method'")
PROTOCOL_NONE_FOR = ("no built-in protocol drives {value!r}",
                     "choose one with --protocol NAME|FILE (built-ins: {builtins})")
# check_protocol's problems: one sentence each, naming the part and the fix
PROTOCOL_PROBLEM_TYPE = "the declaration is a {kind}, not a Protocol: declare PROTOCOL = Protocol(...)"
PROTOCOL_PROBLEM_NAME_CHARS = (
    "name {value!r} is not a plain name: a protocol's name is made of letters, digits, '-', "
    "'_', '.' and ':', starts with a letter or a digit, holds no '..' and has at most {most} "
    "characters (reports, replay files and --protocol carry it; it is never a path): give "
    "e.g. name='token-stager'")
PROTOCOL_PROBLEM_FUNCTIONS_EMPTY = (
    "functions {value!r} names nothing: give the names of the classes, methods or functions "
    "this protocol drives, e.g. functions=('TokenStager', 'stage') (a target is matched to "
    "a protocol by them)")
PROTOCOL_PROBLEM_NAME = ("name {value!r} is not a non-empty text: give the protocol a name "
                         "(e.g. name='my-protocol')")
PROTOCOL_PROBLEM_SUMMARY = ("summary {value!r} is not a text: give one line saying what the "
                            "protocol drives (e.g. summary='rows staged and uploaded each step')")
PROTOCOL_PROBLEM_FUNCTIONS = ("functions {value!r} is not a tuple of names: give the names of "
                              "the classes, methods or functions this protocol drives")
PROTOCOL_PROBLEM_CALLABLE = "{part} {value!r} is not callable: give a function"
PROTOCOL_PROBLEM_ARITY = ("{part}{name}{signature} cannot be called with {what}: give it "
                          "that one parameter (e.g. def {example})")
PROTOCOL_PROBLEM_COMPONENT = ("component {value!r} is not a class name: give the name of the "
                              "class whose instance is the state (e.g. 'GPUModelRunner')")
PROTOCOL_PROBLEM_OPERATIONS = ("operations {value!r} is not a non-empty tuple: give the "
                               "operations of one step, Operation(name, run), in engine order")
PROTOCOL_PROBLEM_OPERATION = "operations[{k}] {value!r} is not an Operation: write Operation(name, run)"
PROTOCOL_PROBLEM_OPERATION_NAME = "operations[{k}] has the name {value!r}: give it a name"
PROTOCOL_PROBLEM_DUPLICATE = "operations named {names} appear twice: give each its own name"
PROTOCOL_PROBLEM_DEVICE_WORK = ("device_work {value!r} is not a tuple of dotted method paths: "
                                "give e.g. ('_model_forward', 'align_ctx.run_fused_precopy')")
PROTOCOL_PROBLEM_DEVICE_WORK_TWICE = ("device_work names {names} twice: each method is "
                                      "device work once; give each path one entry")
PROTOCOL_PROBLEM_PATH = "{part} {value!r} is not a dotted attribute path: give e.g. 'input_batch.req_ids'"
PROTOCOL_PROBLEM_SPACE = "space {value!r} is not a StepSpace: write StepSpace(...)"
PROTOCOL_PROBLEM_RANGE = ("{part} {value!r} is not a range (low, high) with 1 <= low <= high "
                          "<= 1024: give e.g. (1, 8)")
PROTOCOL_PROBLEM_NUMBER = ("{part} {value!r} is not a whole number from {low} to {high}: give "
                           "e.g. {low}")
PROTOCOL_PROBLEM_PARAMS = ("space.params {value!r} is not a dict of parameter names to the "
                           "values drawn for each: give e.g. StepSpace(params={{'block_size': "
                           "(4, 8)}}) (docs/protocols.md, \"Step space\")")
PROTOCOL_PROBLEM_PARAM_NAME = ("space.params key {value!r} is not a parameter name (an "
                               "identifier, read as ctx.sequence.params[NAME]): give e.g. "
                               "StepSpace(params={{'block_size': (4, 8)}})")
PROTOCOL_PROBLEM_PARAM_VALUES = ("space.params[{name!r}] {value!r} is not a non-empty tuple of "
                                 "plain values (int, float, str, bool or None: a saved step "
                                 "sequence keeps them as JSON) to draw from: give e.g. "
                                 "StepSpace(params={{{name!r}: (4, 8)}})")
PROTOCOL_PROBLEM_TEMPERATURES = ("space.temperatures {value!r} is not a non-empty tuple of "
                                 "temperatures (finite numbers >= 0) to draw from: give e.g. "
                                 "StepSpace(temperatures=(0.0, 0.7))")
PROTOCOL_PROBLEM_CHECKS = ("checks {value!r} is not a tuple of ProtocolCheck(id, statement, "
                           "check): give e.g. checks=(ProtocolCheck('ids-positive', 'Every id "
                           "is positive.', ids_positive),), or leave it out")
PROTOCOL_PROBLEM_FLAG = ("space.{part} {value!r} is not True or False: give e.g. "
                         "StepSpace({part}=True)")
PROTOCOL_PROBLEM_CHECK = ("checks[{k}] {value!r} is not a ProtocolCheck(id, statement, check) "
                          "with a callable check: write one")
PROTOCOL_PROBLEM_CHECK_ID = ("checks[{k}].id {value!r} is not an id: its findings' ids and "
                            "replay file names start with it; use letters, digits, '_' and "
                            "'-' only (at most 64, not starting with '-'), e.g. "
                            "'reads_its_count'")
PROTOCOL_PROBLEM_CHECK_TWICE = ("checks have the ids {ids} twice: a check's id names its "
                               "findings and replay files; give each check its own id")
PROTOCOL_PROBLEM_CHECK_STATEMENT = ("checks[{k}].statement {value!r} (check {id!r}) is no "
                                   "statement: the report prints it as the invariant a "
                                   "finding of the check breaks; write the invariant in one "
                                   "sentence, e.g. 'Each row's forward reads its request's "
                                   "count.'")
PROTOCOL_PROBLEM_STAGING = ("staging {value!r} is not a staging schema: give one of {schemas} "
                            "or a schema file")
PROTOCOL_PROBLEM_NO_STATE = ("neither component nor staging is set: name the class whose "
                             "instance is the state (component='...'), or the staging schema of "
                             "a one-step protocol (staging='...')")
PROTOCOL_PROBLEM_BOTH_STATES = ("both component ({component!r}) and staging ({staging!r}) are "
                                "set: a protocol drives either a component across steps or "
                                "one staging call; keep component='...' for a class whose "
                                "instance is the state and remove staging, or keep staging "
                                "for a one-step protocol of a staging function")
# the protocol campaign and its report
PROTOCOL_REPLAY_NOT = ("{value!r} is not a protocol replay file",
                       "give a file a protocol campaign saved (its 'stagecheck_protocol_replay' "
                       "key), or replay a staging finding with 'stagecheck replay'")
#: a protocol replay file with a value out of range (an edited file)
PROTOCOL_REPLAY_FIELD = ("{value!r} is not a stagecheck replay file ({error})",
                         "fix that key (docs/protocols.md, 'Replay files', gives each one's "
                         "range) or give a file a protocol run saved under {save_dir}")
#: a replay file whose protocol file is no longer where it was saved from
PROTOCOL_REPLAY_MOVED = ("the protocol file {path!r} that the replay file {file!r} was saved "
                         "with does not exist any more (moved or removed)",
                         "give its path now: stagecheck replay {command_file} --protocol "
                         "NEWPATH{name}{targets}")
# the command line of protocols (oracles/commands/protocol.py)
REPLAY_UNTRUSTED_PROTOCOL = ("the replay file names the protocol file {target!r}, outside "
                             "this repository ({top}); stagecheck does not run code a replay "
                             "file chose", "if you trust it, give it yourself: stagecheck "
                             "replay FILE --protocol {target}")
#: a note on stderr (and the report's first line) when the target's name chose the protocol
PROTOCOL_TENSOR_DTYPE = ("protocol {value!r}: ctx.tensor got dtype {dtype!r}{guess}, which is no "
                         "torch dtype",
                         "give a torch dtype's name ({names}) or the dtype itself")
#: ctx.function(name) of a name the target's file (or module) has no function of
PROTOCOL_FUNCTION_MISSING = ("protocol {value!r}: ctx.function({name!r}) at {where}: target "
                             "{target} has no module-level function {name!r}{guess} (its "
                             "functions: {names})", "give the name of a function of the "
                             "target's file or module, or a target that has it")
#: a single-call: protocol given a class as its target: it runs one staging function call
PROTOCOL_SINGLE_CALL_CLASS = ("{value!r} names the class {name!r}, and a one-call protocol "
                              "(single-call:{schema}) runs one call of a staging function, "
                              "not a class",
                              "give the staging function (or method) itself as the target, "
                              "e.g. 'path/to/file.py::{function}'; to check the class step "
                              "after step, give instead a protocol that drives it: a built-in "
                              "one ('stagecheck protocol list') or a protocol file of your own "
                              "(docs/protocols.md, 'What a protocol declares')")
#: a warning of the reports: an operation whose when was false at every step drawn (or
#: device work never launched) was checked of nothing, whatever the verdict says
PROTOCOL_NEVER_RAN = ("warning: {what} {name!r} never ran in the {sequences} step sequence(s) "
                      "({steps} step(s)) {run}: nothing of it was checked; {why}")
PROTOCOL_NEVER_RAN_WHY = {
    "operation": "its when was false at every step (or each run ended before it): make it "
                 "true on steps the space draws (StepSpace: dummy, max_drafts, preemption, "
                 "params), or drop the operation",
    "device work": "no operation launched it: call it from an operation (a path the "
                   "protocol's operations never reach checks nothing)"}
#: ``PROTOCOL_NEVER_RAN``'s why where every run of every sequence ended early (in a
#: campaign's report, above its findings; in ``protocol check``'s, which shows none, below
#: the line naming the command that reports them)
_NEVER_REACHED = "every run ended before it (the build, or an operation before it, raised or hung)"
PROTOCOL_NEVER_REACHED = _NEVER_REACHED + ": the error findings below say where and why"
PROTOCOL_NEVER_REACHED_CHECK = _NEVER_REACHED + ": the command named above reports where and why"
PROTOCOL_COMPONENT_ABSENT = ("the protocol's component {component!r} is not a class of {path}"
                             "{guess}; its class {target!r}, which the target names, is "
                             "driven instead (a FILE::Class target overrides component): "
                             "fix component if it is misspelt")
PROTOCOL_CHOSEN = ("protocol {protocol!r} chosen by the target's name {name!r} (the built-in "
                   "protocol that drives it); give --protocol NAME|FILE to choose another")
PROTOCOL_OPTION_UNUSED = ("{given} does not apply to a protocol run (protocol "
                          "{protocol!r}): a protocol run reads {reads}",
                          "leave {flag} out, or check one call per example without a protocol")
PROTOCOL_CAPACITY_UNUSED = ("--max-capacity {value} does not apply to protocol {protocol!r}: its "
                            "step space draws capacities {low} to {high}; --max-capacity bounds "
                            "the scenario of a one-call staging protocol (single-call:...)",
                            "leave --max-capacity out; a protocol's capacities are its "
                            "StepSpace(capacity=...) (docs/protocols.md)")
#: a note: a ``[tool.stagecheck]`` setting of one-call runs, not read by a protocol run
PROTOCOL_CONFIG_UNUSED = ("[tool.stagecheck] {key} does not apply to protocol {protocol!r} (a "
                          "setting of one-call runs): not used")
PROTOCOL_TARGETS_DISAGREE = ("the targets' names choose different protocols ({baseline!r} for "
                             "BASELINE, {candidate!r} for CANDIDATE)",
                             "give the protocol both run: --protocol NAME|FILE")
#: ``protocol check``: each problem on its own line, then what is right
PROTOCOL_CHECK_PROBLEM = "protocol {name!r} ({where}): {problem}"
PROTOCOL_CHECK_FAILED = ("protocol {name!r} ({where}) has {count} problem(s); each line above "
                         "names the part, its value and the fix (docs/protocols.md)")
PROTOCOL_CHECK_WHEN = ("operations[{k}] ({name!r}).when {error} on step {step} of a drawn "
                       "sequence: a 'when' takes the StepView and returns True or False; fix it")
PROTOCOL_CHECK_DRAW = ("drawing step sequences from space {value!r} raised {error}: fix the "
                       "space (docs/protocols.md, 'The step space')")
PROTOCOL_CHECK_OK = ("protocol {name!r} ({where}): the declaration is right, and {count} drawn "
                     "step sequence(s) unfold and choose their operations (each 'when' "
                     "answered)")
#: ``protocol check`` without a target: what was not run
#: --shim on the command line of a run whose targets are all built-in or modules (diff,
#: spec, bench, symbolic, mutants)
SHIM_UNREAD = ("{value!r} is a shim for file targets, and no target of this '{command}' run "
               "is a file: a built-in or 'module:function' target reads no shim, so the file "
               "is not even imported",
               "drop --shim, or name a target 'path/to/file.py::function' that uses it")
#: ``protocol check FILE --shim S`` without a TARGET: nothing would read the shim
PROTOCOL_CHECK_SHIM_UNUSED = ("{value!r} is a shim for a dry run through a target, and no TARGET "
                              "is given: protocol check FILE alone validates the declaration "
                              "and runs no code under test",
                              "give the target after the protocol (stagecheck protocol check "
                              "{protocol} path/to/file.py::Class --shim {value}), or drop --shim")
PROTOCOL_CHECK_NOT_RUN = ("  not run: {parts} (they need the component); dry-run them too: stagecheck protocol check {where} "
                          "path/to/file.py::{component}")
#: ``protocol check FILE TARGET``: the dry run through the target
PROTOCOL_CHECK_DRY_RUN = ("  dry run through {target}: {count} step sequence(s) ran {parts} "
                          "without a mistake of the protocol")
PROTOCOL_CHECK_DRY_FINDINGS = ("  (the code under test showed {count} finding(s) on them, "
                               "not judged here: protocol check judges the protocol, not the "
                               "code; stagecheck spec {target} --protocol {where} reports "
                               "them)")
#: ``--json`` and ``--junit-xml``/``--markdown`` of a protocol run
PROTOCOL_REPORT_UNSUPPORTED = ("{flag} is not written for a protocol run",
                               "use --json PATH (the verdict, every finding, its step sequence "
                               "and its replay file)")
#: the pytest fixture's protocol method
FIXTURE_PROTOCOL_REPRODUCE = "reproduce: {command}"
#: assert_protocol's keywords, checked as the command line checks a protocol run's options
FIXTURE_PROTOCOL_UNKNOWN = ("unknown keyword {value}={hint}",
                            "assert_protocol takes {known} besides its own (target, protocol, "
                            "baseline, examples, seed, device, strict)")
FIXTURE_PROTOCOL_OPTION_UNUSED = ("{value!r} does not apply to a protocol run (protocol "
                                  "{protocol!r}): as the command line's {flag}, it shapes one "
                                  "staging call per example",
                                  "leave {keyword}= out (assert_protocol takes {known}), or "
                                  "check one call per example with assert_equivalent or "
                                  "assert_conforms")
FIXTURE_PROTOCOL_CAPACITY_UNUSED = ("{value!r} does not apply to protocol {protocol!r}: its "
                                    "step space draws capacities {low} to {high}; max_capacity "
                                    "bounds the scenario of a one-call staging protocol "
                                    "(single-call:...)",
                                    "leave max_capacity= out; a protocol's capacities are its "
                                    "StepSpace(capacity=...) (docs/protocols.md)")
#: the heading of a report's errors: of a pair's run, and of one target's (``spec``)
ERRORS_HEADING_PAIR = "ERRORS (spec violations, in-contract divergence, hangs and crashes)"
ERRORS_HEADING_ONE = "ERRORS (spec violations, hangs and crashes)"
#: error findings grouped by cause (oracles/collect.py: error_groups), in every report
ERRORS_GROUPED = ("{errors} error(s), each with the findings that share its cause "
                  "({findings} in all)")
ERRORS_COUNT = "{errors} error(s) from {findings} error finding(s)"
GROUP_MEMBERS = "{count} more finding(s) of this error ({cause}):"
#: why a protocol report's findings are one error (oracles/report/protocol_text.py), by
#: whether every one was shown by the head's step sequence
PROTOCOL_GROUP_CAUSE = {True: "what the same step sequence shows{race}",
                        False: "first seen on the same step sequence{race}; a finding the "
                               "shortest sequence no longer shows was shrunk on its own"}
#: ``PROTOCOL_GROUP_CAUSE``'s ``race``, where a race heads the group
PROTOCOL_GROUP_RACE_FIRST = ", the race first"

#: the kernel oracle (oracles/kernel: require_kernel_backend, --kernel always)
KERNEL_BACKEND_BROKEN = ("the {backend} kernel backend cannot run here: {error}",
                         "repair the install (" + KERNEL_EXTRA + "), or use "
                         "--kernel-backend reference (the same decisions in plain torch), "
                         "or --kernel off")
STREAM_STOPPED = ("the {stream} stream stopped after {done} of {total} examples: {count} "
                  "call(s) {what} ({why})")
KERNEL_ALWAYS_RAN = ("--kernel always: the kernel oracle ran on {examples} example(s) in "
                     "{seconds:.1f} s: {judged}")
#: ``judged`` of ``KERNEL_ALWAYS_RAN``: how its count relates to the examples tried
KERNEL_ALWAYS_EVERY = "every one of the {tried} tried"
KERNEL_ALWAYS_MORE = ", and {extra} more the run made for its findings (repaired inputs, probes)"
# ---------------------------------------------------------------- issue 23: the schema language
# the builder a schema's build uses (oracles/observe/build.py); {call} is the call as written
BUILDER_UNKNOWN_INPUT = ("{call}: the schema declares no input {value!r} (its inputs: {inputs})",
                         "name a declared input, or declare it: Input({value!r}, ...)")
BUILDER_WRONG_KIND = ("{call}: input {value!r} is {kind}, which this call does not make",
                      "make it with {right}")
BUILDER_MADE_OTHERWISE = ("{call}: input {value!r} was already made by {first} for this call",
                          "one input is one object: keep what {first} gave and pass it "
                          "wherever the function expects it (a second object would hide what "
                          "the call does to the first), or declare a second input")
BUILDER_NO_ATTRIBUTES = ("{call} names no attribute",
                         "give attr=input pairs, e.g. b.objects(num_computed_tokens="
                         "'num_computed_tokens')")
BUILDER_BAD_DTYPE = ("{call}: {value!r} is not a numpy dtype", "give e.g. 'int32', 'int64' "
                     "or 'bool'")
BUILDER_BAD_TORCH_DTYPE = ("{call}: {value!r} is not the name of a torch dtype",
                           "give e.g. 'bool', 'int32' or 'int64' (b.dtype('bool') is "
                           "torch.bool)")
BUILDER_UNKNOWN_BUFFER = ("{call}: no field declares buffer {value!r} (the buffers are: "
                          "{buffers})", "name a declared buffer, or declare a Field for it")
# problems schema check finds in a dry run (oracles/schemas.py)
SCHEMA_INPUT_UNSEEN = ("build: input {name!r} reached none of the {calls} drawn calls through "
                       "the builder, so what the call does to it would go unseen; make it "
                       "with {right} (an adapter may pass None for it on some calls, e.g. "
                       "where a flag says the engine's attribute is None, but not on every "
                       "call)")
SCHEMA_RAW_INPUT = ("build: input {name!r} reaches the call as the scenario's own object "
                    "(b.scenario.inputs[{name!r}]), so what the call does to it would go "
                    "unseen and change the scenario; make it with {right}")
SCHEMA_DERIVE_UNFIT = ("field {name!r}: derive gives {value!r} for slot {slot} of a drawn "
                       "in-contract scenario, which {dtype} cannot hold, so every correct "
                       "function would fail there (expected_outcome); narrow the values of "
                       "the inputs it reads (Values(low, high)) until it fits")
SCHEMA_DERIVE_TYPE = ("field {name!r}: derive {said} for slot {slot} of a drawn scenario; a "
                      "derive returns the value the slot must hold: an int (a bool for a bool "
                      "field), KeyError where the request lacks an input")
SCHEMA_DERIVE_BREACH = ("field {name!r}: derive raised {error} for slot {slot} of a drawn "
                        "out-of-contract scenario ({breach}); there too a derive may raise "
                        "KeyError only (no value to expect), or every run that draws it "
                        "stops (exit 2)")
# the fixture's own keywords of the wrong type (oracles/pytest_plugin.py keyword_type_problem)
FIXTURE_STRICT_TYPE = ("keyword strict: {value!r} is not True or False; give strict=True (info "
                       "findings fail the test too) or leave it out")
FIXTURE_SHIMS_TYPE = ("keyword shims: {value!r} is not a list of paths of shim modules; give "
                      "e.g. shims=['tools/vllm_shims.py'] (a list, even of one path)")
# the types of a schema's parts (oracles/schema_types.py type_problems)
SCHEMA_TYPE_TEXT = "{part} {value!r} is not a text: write it as a string (e.g. 'what it stages')"
SCHEMA_TYPE_NAMES = ("{part} {value!r} is not a tuple of names: write a tuple of strings, "
                     "e.g. {part}=('name',) (a trailing comma for one name)")
SCHEMA_TYPE_TUPLE = ("{part} is a {value}, not a tuple of {kind}: write {part}=({kind}(...), "
                     "...) (a trailing comma for one)")
SCHEMA_TYPE_POLICY = ("{where}: {part} {value!r} is not a {kind}: give e.g. {part}={example} "
                      "(docs/schemas.md)")
SCHEMA_TYPE_VALUES = ("{where}: values.{part} {value!r} is not a whole number (special: a tuple "
                      "of them): give e.g. Values(0, 2**20)")
SCHEMA_TYPE_GROUP = ("{where}: group {value!r} is not a name or None: give e.g. group='requests' "
                     "(inputs read from one object share a group)")
# problems with the declarations (oracles/schemas.py check_declarations)
SCHEMA_LENGTH_BAD = ("input {name!r}: length {length!r} must be (shortest, longest) with "
                     "0 <= shortest <= longest")
SCHEMA_MAX_CAPACITY_BAD = ("max_capacity {value!r}: the largest batch drawn must be a whole "
                           "number of slots from 1 to {limit:,} (the most --max-capacity "
                           "takes); vLLM's largest max_num_seqs is 1,024")
SCHEMA_LIST_MODEL = ("build: {error} ({where}); 'stagecheck symbolic' builds every call on that "
                     "list model, which offers a buffer's .np, .cpu and .gpu views (indexing, "
                     "slicing, len, iteration, fill) and copy_to_gpu only, so it would lose "
                     "every path; diff, spec, replay, bench and mutants build on torch buffers "
                     "and run this schema as it is. To run symbolic too, read no other buffer "
                     "attribute in build: the device is b.device ('cpu' or 'cuda'), a torch "
                     "dtype b.dtype('bool'), and the buffer itself goes to the function")
# what a run saves (oracles/report/replay.py save_run)
INFOS_NOT_SAVED = ("stagecheck: {count} info finding(s) not saved as replay files (error "
                   "findings always are); --save-infos saves them")
# ---------------------------------------------------------------- issue 21: reliability
STDOUT_FAILED = ("stagecheck: warning: the report could not be written to standard output "
                 "({error}); every file the run writes is written")
#: at exit, a clean run whose standard output was closed, full, or left by its reader
STDOUT_LOST = ("stagecheck: standard output was closed or could not be written before this "
               "run's output ended (a reader that stopped early got only a part of it): exit "
               "2, not 0 (a run with findings keeps its code); every file it wrote is complete")
#: how a worker ended that the kernel killed at a CPU-time limit set in it (the code's
#: doing: never "killed from outside", which a fresh worker would seem to confirm)
KILLED_AT_CPU_LIMIT = ("killed by the kernel at the CPU-time limit set in it (RLIMIT_CPU, "
                       "hard limit {limit} s)")
KILLED_FROM_OUTSIDE = ("stagecheck: note: a worker process was {what} while it ran example "
                       "{index}; the call ran again in a fresh worker and returned: killed "
                       "from outside (not a finding against the code)")
DEVICE_FIRST_USE_FAILED = ("a worker's first use of the {value} device did not complete ({what}; its limit: {cpu:g} s "
                           "of CPU time or {wall:g} s on the wall clock)",
                           "check that the device works (python -c \"import torch; "
                           "torch.ones(1, device='cuda')\"); a machine that needs longer may "
                           "be given more time with STAGECHECK_LOAD_SECONDS=SECONDS")
TARGET_LOAD_HUNG = ("loading {value!r} did not finish within {cpu:g} s of CPU time or "
                    "{wall:g} s on the wall clock (a hang at load)",
                    "module-level code a target's loading runs must finish; a module whose "
                    "import takes longer may be given more time with "
                    "STAGECHECK_LOAD_SECONDS=SECONDS")
OUTPUT_EMPTY = ("{flag} was given an empty path", "give it a path (e.g. {example}), or "
                "leave the option out")
REPORT_WOULD_OVERWRITE = ("{value!r} exists and is not a stagecheck report ({what}); "
                          "{flag} would replace it with the report",
                          "give {flag} a new path, or the path of a report stagecheck "
                          "wrote; delete the file first if it is yours to lose")
CWD_GONE = ("the current folder {value!r} no longer exists ({error})",
            "change to a folder that exists (cd) and run the command again")
#: a path that is a symbolic link loop (``paths.refuse_loop``): named as one, not missing
LINK_LOOP = ("{path!r} is a symbolic link loop ({error})", "give the path of the {what} itself, "
             "or mend the link")
#: ... as a report or the save folder says why it cannot be written (``report/files.py``)
LINK_LOOP_WHY = "it is a symbolic link loop ({error})"
NOT_A_REGULAR_FILE = ("{path!r} is {kind}, not a file: stagecheck reads a {what} from a "
                      "regular file only (reading this one could wait for ever)",
                      "give the path of the {what} itself")
REPLAY_SCHEMA_FILE = ("the replay file names the schema file {target!r}; a schema file is "
                      "code that runs in stagecheck's own process, so stagecheck runs none "
                      "that a replay file names", "if you trust it, give it yourself: "
                      "stagecheck replay FILE --schema {target}")
SCHEMA_CODE_HUNG = ("{value} did not return within {cpu:g} s of CPU time or {wall:g} s "
                    "on the wall clock{stopped}", "schema code (derive functions, hooks, the call "
                    "adapter) must return at once; fix the schema (or give every call more time with "
                    "STAGECHECK_CODE_SECONDS=SECONDS)")
#: schema or protocol code in the checker that neither the watchdog's signal nor the
#: exception it raises without it could stop: the process ends (exit 2)
CODE_STUCK = ("stagecheck: error: {value} did not return within {cpu:g} s of CPU time or "
              "{wall:g} s on the wall clock, and could not be interrupted (blocked with the "
              "watchdog's signal ignored): the run ends here, without a verdict; such code "
              "must return at once")
#: an exit handler schema or protocol code registered called os._exit as the run ended
EXIT_HANDLER_REFUSED = ("stagecheck: an exit handler that schema or protocol code registered "
                        "called os._exit({status}); refused: the run's exit code stands")
#: under a hang or a crash finding: how its example was shrunk (``shrink_stopped``)
SHRUNK_BY_SIZE = ("shrunk by size only (fewer requests and slots; each try that hangs or "
                  "ends its process waits out a limit): the values of its inputs and buffers "
                  "are as drawn, not the simplest")
#: the REPRODUCE section of the text report: its tests are printed at the left margin
REPRODUCE_PASTE = "each pastes into a test file as printed"
#: the REPRODUCE section of the text report, for a shrunk scenario too large to print
REPRODUCE_TOO_LARGE = ("    [{id}] the shrunk scenario has {slots} slots ({chars:,} characters of "
                       "JSON), too many to print as a test here: {where}; the command "
                       "line's `--markdown FILE` (of diff or spec) writes the test in full")
SCHEMA_CODE_FAILED = ("{value} raised {error} during the run",
                      "schema and protocol code (derive, column, build, a protocol's "
                      "checks) must not raise (a derive only KeyError, for a missing "
                      "input); fix the schema or protocol file, then 'stagecheck schema "
                      "check FILE' or 'stagecheck protocol check FILE'")
PROTOCOL_CHECK_RAISED = ("{value} raised {error} during the run",
                         "a protocol's check reads the sequence and the trace (docs/"
                         "protocols.md, 'Checks and the trace they receive') and returns its "
                         "messages; "
                         "it must not raise: fix the protocol file, then 'stagecheck protocol "
                         "check FILE TARGET'")
#: a derive's value of a type its buffer cannot hold, found during a run
SCHEMA_VALUE_RETURNED = ("{value} {error} during the run",
                         "a derive returns the value the slot must hold: an int (a bool for "
                         "a bool field); fix the schema, then 'stagecheck schema check FILE'")
SCHEMA_CODE_RETURNED = ("{value} {error} during the run",
                        "a protocol's check returns a list of messages, empty where it holds; "
                        "fix the protocol file, then 'stagecheck protocol check FILE "
                        "TARGET' (its checks run in a dry run on the target)")
SCHEMA_CODE_CHANGED = ("{value} changed the checker's process in a way stagecheck cannot "
                       "undo: {changes}", "code the checker runs (schema derive functions, "
                       "hooks, a protocol's when and checks) must not lower resource limits; "
                       "fix the schema")
SCHEMA_LOAD_RAISED = ("loading schema {value!r} in a worker ran its code, which raised "
                      "{error}", "a schema's module-level code and its functions (build, "
                      "derive, hooks) must not fail on what its own space draws, however often "
                      "they run; 'stagecheck schema check FILE' dry-runs them")
SCHEMA_CODE_EXITED = ("{value} raised {error}", "schema code must not exit or raise "
                      "KeyboardInterrupt; fix the schema")
SCHEMA_CODE_MEMORY = ("{value} held more than {mib} MiB of memory beyond what the checker "
                      "held when it started", "code the checker runs (schema derive functions "
                      "and hooks, protocol when functions and checks) must stay small: judge "
                      "from the values given; STAGECHECK_MEMORY_MIB sets the limit")
SCHEMA_CODE_FORKED = ("{value} called os.fork(), which the checker refuses: the copy would "
                      "carry on the checker's run beside it", "code the checker runs "
                      "(schema derive functions and hooks, protocol when functions and checks) "
                      "must not fork; fix the file")
SCHEMA_PATCHES = ("schema file {value!r} changed stagecheck's own code when it ran ({names})",
                  "a schema declares inputs, fields and policies; it must not replace "
                  "stagecheck's functions or builtins")
#: how a worker ended whose code under test removed or replaced, in ``sys.modules``, the
#: modules of stagecheck, torch or numpy its own code runs on (``worker/modules.py``)
BROKE_WORKER_MODULES = ("broke its worker: removed or replaced modules of stagecheck, torch "
                        "or numpy in sys.modules, which the worker's own code runs on")
#: ... and whose code under test closed the descriptors of its pipe to the checker, or
#: opened other files in their place (``worker/modules.py``)
CLOSED_WORKER_PIPE = ("closed its worker's pipe to stagecheck (os.close or os.closerange of "
                      "descriptors it did not open), so the worker could not answer")
SCHEMA_CHANGES_PROCESS = ("schema file {path!r} changed the process that imported it in a "
                          "way stagecheck cannot undo: {changes}",
                          "a schema declares inputs, fields and policies; remove what changes "
                          "the process (a resource limit, the working folder) from its "
                          "module-level code")
PROTOCOL_CHANGES_PROCESS = ("protocol file {path!r} changed the process that imported it in "
                            "a way stagecheck cannot undo: {changes}",
                            "a protocol declares its state, operations and checks; remove what "
                            "changes the process (a resource limit) from its module-level code")
SCHEMA_ENDED = ("schema file {value!r} ended the process that loaded it and dry-ran it: {what}",
                "module-level code and the functions of a schema must not exit; fix the file")
SCHEMA_HUNG = ("schema file {value!r} did not finish loading and its dry run within "
               "{seconds:g} s of CPU time or {wall:g} s on the wall clock (a hang)", "its module-level code and its "
               "functions (build, derive, hooks) must return; fix the file")
FIXTURE_NOT_A_TARGET = ("{value} is not a staging target (it is {kind})",
                        "give a target spec string ('path/file.py::function', "
                        "'pkg.module:function', a builtin name), a Target or the staging "
                        "function itself{more}")
#: the fixture's line under a failure: where its error findings were saved
FIXTURE_SAVED = ("{count} finding(s) saved under {path}; each runs again with its "
                 "'stagecheck replay FILE' line above")
#: ``symbolic``: the batch sizes its paths cover, after its verdict
#: what a progress line says while an error finding is shrunk (no example runs meanwhile)
PROGRESS_SHRINKING = "shrinking an error finding:"
SYMBOLIC_BOUND = (", batches of at most {capacity} request(s) (code that runs only for "
                  "larger batches, such as a fast path for num_reqs > {capacity}, was not "
                  "explored: --max-capacity N, or stagecheck diff, which draws batches up "
                  "to 1,024)")
#: the fixture's ``reproduce:`` line, where the test ran the hypothesis engine (its default)
FIXTURE_REPRODUCE_ENGINE = (" (the command line searches with its batched engine: the same "
                            "settings, other examples; each replay line above, where there is "
                            "one, runs an error finding's own example again)")
FIXTURE_NOT_ISOLABLE = ("{value!r} cannot be loaded in a worker process (it is a "
                        "lambda, a function defined inside another function, or has no "
                        "source file), and stagecheck runs code under test only there",
                        "define it at module level of a file (a test module will do), or "
                        "give it as 'path/to/file.py::name'")

# ---------------------------------------------------------------- protocol leftovers (issue 22)
# a protocol file is code: loaded and dry-run in a worker first (protocol/load.py)
PROTOCOL_ENDED = ("protocol file {value!r} ended the process that loaded it and dry-ran it: "
                  "{what}", "the module-level code and the functions of a protocol (build, "
                  "operations, when, checks) must not exit; fix the file")
PROTOCOL_HUNG = ("protocol file {value!r} did not finish loading and its dry run within "
                 "{seconds:g} s of CPU time or {wall:g} s on the wall clock (a hang)", "its module-level code and its "
                 "functions (when, checks) must return; fix the file")
#: a hang the dry run's own limit stopped inside the file (``probe_protocol``)
PROTOCOL_PROBE_HUNG = ("protocol file {value!r}: its {part} did not return within {limit:g} s "
                       "when the file was loaded and dry-run (stopped at {where})",
                       "module-level code and the functions the dry run calls (when, checks) "
                       "must return; fix the code there")
PROTOCOL_PATCHES = ("protocol file {value!r} changed stagecheck's own code or torch's when it "
                    "ran ({names})", "a protocol declares its state, operations and checks; "
                    "it must not replace stagecheck's or torch's functions or builtins; fix "
                    "the file")
#: the fix of a protocol's own code that hung or exited in the checker (guard.guarded_call)
PROTOCOL_CODE_HUNG_FIX = ("protocol code (module-level code, when, checks) must return at "
                          "once; fix the protocol file")
PROTOCOL_CODE_EXITED_FIX = ("protocol code must not exit or raise KeyboardInterrupt; fix the "
                            "protocol file")
#: a target given as a bare file in a protocol run: the component class goes after '::'
PROTOCOL_TARGET_FILE = ("{value!r} names a file, not the {what} in it that protocol "
                        "{protocol!r} drives", "write '{value}::{name}'; a shim file goes with "
                        "--shim {value}")
#: one refusal of a replay file naming code outside the trust boundary: each part, one fix
REPLAY_UNTRUSTED_PARTS = ("the replay file names code outside this repository ({top}): "
                          "{parts}; stagecheck does not run code a replay file chose",
                          "if you trust it, name it yourself: {command}")
