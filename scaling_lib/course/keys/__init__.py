"""Answer keys of the exercise notebooks: one module per chapter.

Each function takes the drawn parameters of one exercise (a ``grading.Params``) and returns the
expected answer by calling the library, so a graded cell reads ``check(answer, key.t_math(p))``
and the answer is never typed. Keeping keys here (not in the cell) also lets an instructor's
grading tool recompute any expected answer from a seed.
"""
