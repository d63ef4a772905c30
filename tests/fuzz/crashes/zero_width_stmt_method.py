class A:
 def f(s):
  0
  ;_
