"""Defaults and names of the planner's choices, in a module without Polars so that the
command line can build its options without importing the formulas."""

# The default minimum decode speed of one sequence a recommendation must reach: twice a
# person's silent reading speed. Adults read non-fiction at 238 words a minute (Brysbaert
# 2019, "How many words do we read per minute?", J. Memory and Language 109:104047), about
# 5.3 tokens a second at OpenAI's rule of thumb of 0.75 words per token
# (https://help.openai.com/en/articles/4936856); twice that, so that the answer is read
# without waiting, rounded: 10 tok/s. An assumption, given so that a person can change it.
DEFAULT_MIN_DECODE_TOK_S = 10.0

# Dual-channel DDR5-5600: 2 x 64 bit x 5600 MT/s = 89.6 GB/s, the host profile used for
# weights and experts kept in system RAM unless the caller gives its own (sizing.formulas.speed).
DEFAULT_HOST_BANDWIDTH_GB_S = 89.6

# The prompt a time to first token is given for unless the question names one.
DEFAULT_PROMPT_TOKENS = 4096

# The objectives sizing.questions.objectives ranks hardware by.
OBJECTIVES = ("cheapest_to_buy", "fastest_under_budget", "cheapest_per_mtok", "cheapest_to_rent")
