"""User-visible messages. Tests import these constants instead of restating text."""

# target loading
TARGET_EMPTY = ("argument {arg}: the target is empty; give a builtin name ({builtins}), "
                "'package.module:function', 'path/to/file.py::function' or "
                "'git:REV:path/to/file.py::function'")
TARGET_UNKNOWN = ("argument {arg}: {value!r} is not a builtin target, a 'module:function', a "
                  "'file.py::function' nor a 'git:REV:file.py::function'; builtins are "
                  "{builtins}")
TARGET_FILE_MISSING = ("argument {arg}: file {path!r} in {value!r} does not exist; check the path "
                       "(relative paths are taken from {cwd})")
TARGET_FILE_SYNTAX = ("argument {arg}: {path!r} in {value!r} is not valid Python ({error}); fix "
                      "the file or point at another revision")
TARGET_FUNCTION_MISSING = ("argument {arg}: {path!r} has no module-level function {name!r} "
                           "(in {value!r}); functions there: {available}")
TARGET_NOT_FUNCTION = ("argument {arg}: {name!r} in {value!r} is a {kind}, not a function; name "
                       "the staging function itself")
TARGET_BAD_SYNTAX = ("argument {arg}: {value!r} is malformed: {why}; write "
                     "'path/to/file.py::function' or 'package.module:function'")
TARGET_MODULE_MISSING = ("argument {arg}: module {module!r} in {value!r} cannot be imported "
                         "({error}); install it or use 'path/to/file.py::{name}' to load the "
                         "file without its imports")
TARGET_ATTRIBUTE_MISSING = ("argument {arg}: module {module!r} has no attribute {name!r} (in "
                            "{value!r}); check the function name")
TARGET_SIGNATURE = ("argument {arg}: {value!r} has signature {signature}, which cannot take the "
                    "staging arguments (ctx, scheduler_output, req_ids, num_reqs, requests, "
                    "mamba_state_idx); point at the staging function")
TARGET_COMPILE = ("argument {arg}: {value!r} could not be compiled on its own ({error}); the "
                  "function or a module-level name it uses needs code stagecheck does not run")
GIT_NOT_REPO = ("argument {arg}: {value!r} names a git revision but {cwd} is not inside a git "
                "repository; run from the repository or use a plain file target")
GIT_BAD_REVISION = ("argument {arg}: revision {rev!r} in {value!r} is unknown to git; check it "
                    "with 'git rev-parse {rev}'")
GIT_PATH_MISSING = ("argument {arg}: {path!r} does not exist at revision {rev!r} (in {value!r}); "
                    "paths are relative to the repository root, check 'git ls-tree -r {rev}'")

# option values
BAD_DEVICE = ("option --device: {value!r} is not a device; use 'cpu' or 'cuda'")
CUDA_UNAVAILABLE = ("option --device: 'cuda' was asked for but torch sees no CUDA device "
                    "(torch {torch}); run on a GPU machine or use --device cpu")
BAD_EXAMPLES = ("option --examples: {value!r} is not a whole number >= 1; give e.g. --examples 500")
BAD_CYCLES = ("option --gpu-busy-cycles: {value!r} is not a whole number of cycles; give e.g. "
              "--gpu-busy-cycles 1000000, or 0 for none")
BAD_CAPACITY = ("option --max-capacity: {value!r} is not a whole number >= 1; give e.g. "
                "--max-capacity 8")
BAD_BUDGET = "option --budget: {value!r} is not a whole number >= 1; give e.g. --budget 300"
BAD_STEPS = "option --steps: {value!r} is not a whole number >= 1; give e.g. --steps 2"
BAD_JOBS = "option --jobs: {value!r} is not a whole number >= 1; give e.g. --jobs 2"
BAD_SEED = "option --seed: {value!r} is not a whole number; give e.g. --seed 0"
BAD_TIMEOUT = "option {option}: {value!r} is not a positive number of seconds; give e.g. {option} 5"
JSON_UNWRITABLE = ("option {option}: cannot write {value!r} ({error}); give a path in a writable "
                   "directory")
SAME_REPORT_PATH = ("options --json and --junit-xml: both name {value!r}; give each report its "
                    "own path")
USAGE = "{message}; run '{prog} --help' for the options"

# report lines
CLEAN_RUN_HINT = ("No error finding. To search harder: --examples {more} (now {examples}), "
                  "another --seed (now {seed}), or a larger --max-capacity (now {capacity}).")
KERNEL_CLEAN_HINT = ("No difference. To search harder: --examples {more} (now {examples}) or "
                     "another --seed (now {seed}); on a GPU, --device cuda runs the compiled "
                     "kernel.")
HANG = "the call did not return within {seconds} s; stopped it (reported as a hang)"
