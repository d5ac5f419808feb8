import { useState } from 'react'
import { Pressable, StyleSheet, Text, TextInput, View } from 'react-native'

import type { Verification, VerificationMethod } from './proof.js'

export type { Verification, VerificationMethod }

const methods: { method: VerificationMethod; label: string; hint: string }[] = [
  { method: 'otp', label: 'One-time code', hint: 'The code the patient received' },
  { method: 'id_check', label: 'ID check', hint: 'Document type and last 4 characters' },
  { method: 'signature', label: 'Signature', hint: 'Signature captured on the next screen' },
]

/** How the patient was verified at the door: the `verification` of `deliver` ({method, evidence}). */
export function PatientVerification({ onVerified }: { onVerified: (verification: Verification) => void }) {
  const [method, setMethod] = useState<VerificationMethod>('otp')
  const [evidence, setEvidence] = useState('')
  const chosen = methods.find((m) => m.method === method)!
  return (
    <View>
      <View style={styles.methods} accessibilityRole="radiogroup">
        {methods.map((m) => (
          <Pressable
            key={m.method}
            accessibilityRole="radio"
            accessibilityState={{ checked: m.method === method }}
            onPress={() => setMethod(m.method)}
            style={[styles.method, m.method === method && styles.chosen]}
          >
            <Text>{m.label}</Text>
          </Pressable>
        ))}
      </View>
      <TextInput
        value={evidence}
        onChangeText={setEvidence}
        placeholder={chosen.hint}
        accessibilityLabel={chosen.hint}
        style={styles.input}
        keyboardType={method === 'otp' ? 'number-pad' : 'default'}
        autoCapitalize="characters"
      />
      <Pressable
        accessibilityRole="button"
        disabled={evidence.trim() === ''}
        style={styles.submit}
        onPress={() => onVerified({ method, evidence: evidence.trim() })}
      >
        <Text style={styles.submitText}>Patient verified</Text>
      </Pressable>
    </View>
  )
}

const styles = StyleSheet.create({
  methods: { flexDirection: 'row', gap: 8, marginBottom: 12 },
  method: { paddingHorizontal: 12, paddingVertical: 8, borderRadius: 16, borderWidth: 1, borderColor: '#90a4ae' },
  chosen: { backgroundColor: '#e0f2f1', borderColor: '#0a7d5a' },
  input: { borderWidth: 1, borderColor: '#90a4ae', borderRadius: 6, padding: 10, fontSize: 16 },
  submit: { marginTop: 12, padding: 14, borderRadius: 6, backgroundColor: '#0a7d5a', alignItems: 'center' },
  submitText: { color: '#fff', fontWeight: '700' },
})
