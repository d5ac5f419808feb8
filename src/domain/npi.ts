/**
 * A National Provider Identifier's last digit checks the other nine (45 CFR 162.406): the Luhn
 * formula over the nine digits prefixed with 80840, the health-care card issuer prefix of
 * ISO/IEC 7812. A mistyped NPI names some other provider or none; this catches every one-digit
 * typo and most swaps of neighbouring digits.
 */
export function npiCheckDigitHolds(npi: string): boolean {
  if (!/^\d{10}$/.test(npi)) return false
  const digits = `80840${npi}`
  let sum = 0
  // Luhn: from the rightmost digit (the check digit), double every second digit.
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i])
    if (i % 2 === 1) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
  }
  return sum % 10 === 0
}
